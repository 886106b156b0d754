package termtext

import "testing"

func TestArgv(t *testing.T) {
	got := Argv([]string{"npx", "-y", "a b", "", "x\x1b[2Jy", "$HOME"})
	want := `npx -y "a b" "" "x\x1b[2Jy" "$HOME"`
	if got != want {
		t.Errorf("Argv = %s, want %s", got, want)
	}
}
