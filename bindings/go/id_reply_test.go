package snowflake

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// The take replies' golden bodies (tests/protocol/id_replies.json), the same rows the C++
// reader runs (tests/protocol/id_reply_test.cc): this package reads each to the same IDs,
// or refuses it in the same words, and finds the same code in each refusal.
const idReplyFixtures = "../../tests/protocol/id_replies.json"

func TestIDReplyFixtures(t *testing.T) {
	raw, err := os.ReadFile(idReplyFixtures)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Reads []struct {
			Name  string   `json:"name"`
			Body  string   `json:"body"`
			Room  int      `json:"room"`
			IDs   []string `json:"ids"`
			Error *string  `json:"error"`
		} `json:"reads"`
		ErrorCodes []struct {
			Name string `json:"name"`
			Body string `json:"body"`
			Code string `json:"code"`
		} `json:"error_codes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", idReplyFixtures, err)
	}
	if len(doc.Reads) == 0 || len(doc.ErrorCodes) == 0 {
		t.Fatalf("%s: no rows", idReplyFixtures)
	}
	for _, row := range doc.Reads {
		out := make([]uint64, row.Room)
		n, why := readIDsText([]byte(row.Body), out)
		if row.Error != nil {
			if why != *row.Error {
				t.Errorf("%s: got (%d, %q), want the error %q", row.Name, n, why, *row.Error)
			}
			continue
		}
		if why != "" || n != len(row.IDs) {
			t.Errorf("%s: got (%d, %q), want %d IDs", row.Name, n, why, len(row.IDs))
			continue
		}
		for i, text := range row.IDs {
			want, err := strconv.ParseUint(text, 10, 64)
			if err != nil {
				t.Fatalf("%s: fixture ID %q: %v", row.Name, text, err)
			}
			if out[i] != want {
				t.Errorf("%s: ID %d is %d, want %d", row.Name, i, out[i], want)
			}
		}
	}
	for _, row := range doc.ErrorCodes {
		if got := errorCodeOf([]byte(row.Body)); got != row.Code {
			t.Errorf("%s: code %q, want %q", row.Name, got, row.Code)
		}
	}
}
