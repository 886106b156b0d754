package cassette

import "strings"

// FileName is the file name of server's cassette in a folder of them (wrap
// --cassette DIR, the configuration file's cassette-dir): the name with every
// character but letters, digits, '-', '_' and '.' made '_', and ".jsonl".
func FileName(server string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, server)
	if safe == "" || strings.Trim(safe, ".") == "" {
		safe = "server"
	}
	return safe + ".jsonl"
}
