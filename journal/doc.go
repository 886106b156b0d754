// Package journal is the journal's format, in one room: where a server's journal is
// (Dir, Path, Rotated), the one writer (Writer: whole lines, O_APPEND, rotation shared by
// the proxies of one server) and the one reader (Reader, Record) that `bir-proxy log`,
// `log --stats` and `bir-proxy verify --from-journal` read it with.
//
// A journal is JSON lines (SPEC §5), one step report (report.Step) a line, and the
// records that are not calls: a tool's drift from its pin (Drift). Those carry
// "ack": null, so that every reader of reports skips them, older ones included (they
// skip a line with an "ack" member: the spool's done marks), and a "record" member
// naming their kind. The spool's files (package recorder) share the format, with the
// done marks {"ack":SEQ} between the reports; the Reader reads both.
package journal
