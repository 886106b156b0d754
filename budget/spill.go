package budget

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the spill folder and of its writer (docs/budget.md).
const (
	// MaxFiles and MaxBytes bound the spill folder: past either, its oldest files
	// are removed, after each new one.
	MaxFiles = 64
	MaxBytes = 256 << 20
	// syncMax is the largest answer written on the server's pump; a longer one is
	// copied and written by the spill's goroutine.
	syncMax = 256 << 10
	// queueMax and queueBytes bound what waits for that goroutine: past them the
	// answer is not kept (the host's note says so).
	queueMax   = 8
	queueBytes = 64 << 20
)

// Spill keeps answers whole in files of one folder.
type Spill struct {
	dir    string
	log    *slog.Logger
	seq    atomic.Uint64
	queued atomic.Int64 // bytes waiting for the writer
	start  sync.Once
	jobs   chan job
	warned atomic.Bool
	mkdir  sync.Once
	dirErr error
}

type job struct {
	f           *os.File
	part, final string
	data        []byte
	pruneOnly   bool
}

// NewSpill is a Spill writing to dir (created 0700 at the first answer kept).
func NewSpill(dir string, log *slog.Logger) *Spill {
	if log == nil {
		log = slog.Default()
	}
	return &Spill{dir: dir, log: log, jobs: make(chan job, queueMax)}
}

// Dir is the folder of s.
func (s *Spill) Dir() string { return s.dir }

// Keep writes msg to a new file of the folder and returns its path; an error says why
// it could not (said once on stderr too). A long msg is copied and written by the
// spill's goroutine: the path names the file once it is whole (it is written under
// another name and renamed).
func (s *Spill) Keep(msg []byte) (string, error) {
	path, err := s.keep(msg)
	if err != nil && s.warned.CompareAndSwap(false, true) {
		s.log.Warn("bir-proxy: a cut answer could not be kept whole in the spill folder", "dir", s.dir, "err", err)
	}
	return path, err
}

func (s *Spill) keep(msg []byte) (string, error) {
	s.mkdir.Do(func() { s.dirErr = ensureDir(s.dir) })
	if s.dirErr != nil {
		return "", s.dirErr
	}
	async := len(msg) > syncMax
	if async && (len(s.jobs) >= queueMax || s.queued.Load()+int64(len(msg)) > queueBytes) {
		return "", errors.New("the spill queue is full")
	}
	f, part, final, err := s.open()
	if err != nil {
		return "", err
	}
	if !async {
		if err := finish(f, part, final, msg); err != nil {
			return "", err
		}
		s.pruneSoon()
		return final, nil
	}
	s.queued.Add(int64(len(msg)))
	j := job{f: f, part: part, final: final, data: append([]byte(nil), msg...)}
	select {
	case s.jobs <- j:
		return final, nil
	default:
		s.queued.Add(-int64(len(msg)))
		f.Close()
		os.Remove(part)
		return "", errors.New("the spill queue is full")
	}
}

// open creates the next spill file under its .part name (final once whole).
func (s *Spill) open() (f *os.File, part, final string, err error) {
	s.mkdir.Do(func() { s.dirErr = ensureDir(s.dir) })
	if s.dirErr != nil {
		return nil, "", "", s.dirErr
	}
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(s.seq.Add(1), 10) + ".json"
	final = filepath.Join(s.dir, name)
	part = final + ".part"
	// O_NOFOLLOW and O_EXCL: a link planted at the name is never written through.
	f, err = os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return nil, "", "", err
	}
	s.start.Do(func() { go s.writer() })
	return f, part, final, nil
}

// pruneSoon asks the writer to prune the folder (once, when a prune is asked
// already).
func (s *Spill) pruneSoon() {
	select {
	case s.jobs <- job{pruneOnly: true}:
	default: // a prune is on its way already
	}
}

// finish writes data to f, closes it, and gives it its final name.
func finish(f *os.File, part, final string, data []byte) error {
	_, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, final)
	}
	if err != nil {
		os.Remove(part)
	}
	return err
}

// writer writes the long answers and prunes the folder, one job at a time.
func (s *Spill) writer() {
	for j := range s.jobs {
		if !j.pruneOnly {
			err := finish(j.f, j.part, j.final, j.data)
			s.queued.Add(-int64(len(j.data)))
			if err != nil && s.warned.CompareAndSwap(false, true) {
				s.log.Warn("bir-proxy: a cut answer could not be kept whole in the spill folder", "dir", s.dir, "err", err)
			}
		}
		prune(s.dir)
	}
}

// ensureDir makes dir, 0700, and refuses one that is a symbolic link or not a folder.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		os.Chmod(dir, 0o700)
	}
	return nil
}

// prune removes the oldest spill files of dir past MaxFiles or MaxBytes. Names begin
// with the time they were written: their order is their age.
func prune(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	var total int64
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), info.Size()})
		total += info.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	for len(files) > 0 && (len(files) > MaxFiles || total > MaxBytes) {
		os.Remove(filepath.Join(dir, files[0].name))
		total -= files[0].size
		files = files[1:]
	}
}

// Budget is what the proxy does with a host's tools/call answers: those whose result
// is over Bytes are cut (Cut) and kept whole (Spill).
type Budget struct {
	Bytes int
	Spill *Spill
	// Cut, when set, is told each answer cut: its raw id and the spill file ("" when
	// it could not be kept).
	Cut func(id []byte, spill string)
}

// Answer is toolpolicy.Policy's Answer hook: msg cut, or nil for msg as it is.
func (b *Budget) Answer(id, msg []byte) []byte {
	if !Over(msg, b.Bytes) {
		return nil
	}
	var path string
	out, ok := Cut(msg, b.Bytes, func() string {
		var err error
		if b.Spill == nil {
			err = errors.New("no spill folder")
		} else {
			path, err = b.Spill.Keep(msg)
		}
		return cutNote(len(msg), path, err)
	})
	if !ok {
		return nil
	}
	if b.Cut != nil {
		b.Cut(id, path)
	}
	return out
}

// cutNote is the last item's text of an answer of size bytes cut: where it was kept
// (path), or why it could not be (err).
func cutNote(size int, path string, err error) string {
	n := strconv.Itoa(size)
	if err != nil {
		return "[bir-proxy: this result was cut to fit the result budget (--max-result-tokens); the whole answer (" + n + " bytes) could not be kept: " + err.Error() + "]"
	}
	return "[bir-proxy: this result was cut to fit the result budget (--max-result-tokens); the whole answer (" + n + " bytes) is in " + path + "]"
}
