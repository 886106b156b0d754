package mcpdiff

import "testing"

// FuzzCompare: any two values compare without a panic; a value is the same as itself;
// the verdict does not depend on which side is which.
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"{\"a\":[1,2]}"}]}`), []byte(`{"content":[{"type":"text","text":"x"}],"isError":true}`), false)
	f.Add([]byte(`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}],"structuredContent":{"at":"2026-01-01T00:00:00Z"}}`), []byte(`[[[[{"a":{"b":1}}]]]]`), true)
	f.Add([]byte(`{"a":1,"a":2,"b":1e400,"c":"\ud800"}`), []byte(`{"a":`), false)
	f.Fuzz(func(t *testing.T, a, b []byte, strict bool) {
		o := Options{Strict: strict, Ignore: []string{"content[*].text.a", "structuredContent.*"}}
		ab, err := Compare(Answer{Result: a}, Answer{Result: b}, o)
		if err != nil {
			t.Fatal(err)
		}
		ba, _ := Compare(Answer{Result: b}, Answer{Result: a}, o)
		if ab.Status != ba.Status {
			t.Fatalf("a→b %s, b→a %s", ab.Status, ba.Status)
		}
		if aa, _ := Compare(Answer{Result: a}, Answer{Result: a}, o); aa.Status != Same {
			t.Fatalf("a→a %s\n%s", aa.Status, aa.Diff)
		}
		if _, err := Compare(Answer{Error: a}, Answer{Result: b}, o); err != nil {
			t.Fatal(err)
		}
		CompareTool(a, b)
	})
}
