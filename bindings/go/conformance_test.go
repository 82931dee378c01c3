package snowflake

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The takers' conformance table (tests/conformance/cases.json), run by this package from
// the fixtures conformance_fixture writes ($SNOWFLAKE_CONFORMANCE_FIXTURE; ctest sets it).
// The C++ client and the Python, Java and Node.js packages run the same rows. For a row
// that expects an error, the error must follow the vocabulary's action for its code, as
// conformance_fixture --vocabulary prints it from the C++ tables: errors.Is(err,
// ErrUnavailable) exactly for fail_over, and Action(err) that action.

type conformanceRow struct {
	Name string `json:"name"`
	Take struct {
		Call      string `json:"call"`
		Count     int    `json:"count"`
		TimeoutMs *int   `json:"timeout_ms"`
	} `json:"take"`
	AfterOpen     json.RawMessage              `json:"after_open"`
	Expect        conformanceExpect            `json:"expect"`
	ExpectByTaker map[string]conformanceExpect `json:"expect_by_taker"`
	Why           string                       `json:"why"`
}

type conformanceExpect struct {
	Stage            string            `json:"stage"`
	Code             string            `json:"code"`
	MessageContains  string            `json:"message_contains"`
	Count            *int              `json:"count"`
	IDs              string            `json:"ids"`
	RefillHint       *uint32           `json:"refill_hint"`
	RefillRequestMin *uint32           `json:"refill_request_min"`
	Waiters          *uint64           `json:"waiters"`
	Uncounted        *uint64           `json:"uncounted"`
	ServiceTaken     map[string]uint64 `json:"service_taken"`
	Signal           string            `json:"signal"`
}

// knownExpectKeys are the expect keys this runner checks (each a field above). A row
// whose expect has another fails rather than pass with the check left out.
var knownExpectKeys = map[string]bool{"stage": true, "code": true, "message_contains": true,
	"count": true, "ids": true, "refill_hint": true, "refill_request_min": true, "waiters": true,
	"uncounted": true, "service_taken": true, "signal": true}

// regionWords are the consumer region's words as conformance_fixture --region-words reads
// them, attached to the row's socket as a taker attaches (the region is a memfd: no file
// to read).
type regionWords struct {
	RefillRequest uint32            `json:"refill_request"`
	RefillHint    uint32            `json:"refill_hint"`
	Waiters       uint64            `json:"waiters"`
	Uncounted     uint64            `json:"uncounted"`
	ServiceTaken  map[string]uint64 `json:"service_taken"`
}

const conformanceCases = "../../tests/conformance/cases.json"

func runFixture(t *testing.T, name, dir string, afterOpen bool) []uint64 {
	t.Helper()
	tool := os.Getenv("SNOWFLAKE_CONFORMANCE_FIXTURE")
	if tool == "" {
		t.Fatal("SNOWFLAKE_CONFORMANCE_FIXTURE must name the conformance_fixture binary (ctest sets it)")
	}
	args := []string{"--cases", conformanceCases, "--case", name, "--dir", dir,
		"--live-pid", strconv.Itoa(os.Getpid())}
	if afterOpen {
		args = append(args, "--after-open")
	}
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		t.Fatalf("conformance_fixture %v: %v", args, err)
	}
	var printed struct {
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal(out, &printed); err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(printed.IDs))
	for i, s := range printed.IDs {
		ids[i], _ = strconv.ParseUint(s, 10, 64)
	}
	return ids
}

func readRegionWords(t *testing.T, dir string) regionWords {
	t.Helper()
	out, err := exec.Command(os.Getenv("SNOWFLAKE_CONFORMANCE_FIXTURE"), "--region-words", "--dir",
		dir).Output()
	if err != nil {
		t.Fatalf("conformance_fixture --region-words: %v", err)
	}
	var words regionWords
	if err := json.Unmarshal(out, &words); err != nil {
		t.Fatal(err)
	}
	return words
}

// cppActions is {code: action} of the library's error codes, from the C++ tables.
func cppActions(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command(os.Getenv("SNOWFLAKE_CONFORMANCE_FIXTURE"), "--vocabulary").Output()
	if err != nil {
		t.Fatalf("conformance_fixture --vocabulary: %v", err)
	}
	var cpp struct {
		Errors  []string `json:"errors"`
		Actions []string `json:"error_actions"`
	}
	if err := json.Unmarshal(out, &cpp); err != nil || len(cpp.Errors) != len(cpp.Actions) {
		t.Fatalf("conformance_fixture --vocabulary: %v (%d codes, %d actions)", err,
			len(cpp.Errors), len(cpp.Actions))
	}
	actions := make(map[string]string, len(cpp.Errors))
	for i, code := range cpp.Errors {
		actions[code] = cpp.Actions[i]
	}
	return actions
}

func TestConformanceTable(t *testing.T) {
	actions := cppActions(t)
	data, err := os.ReadFile(conformanceCases)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []conformanceRow `json:"cases"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	// The same rows with each expect's keys, to refuse one this runner does not check.
	var keys struct {
		Cases []struct {
			Expect        map[string]json.RawMessage            `json:"expect"`
			ExpectByTaker map[string]map[string]json.RawMessage `json:"expect_by_taker"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) == 0 {
		t.Fatal("no rows")
	}
	for i, row := range table.Cases {
		row, rowKeys := row, keys.Cases[i]
		t.Run(row.Name, func(t *testing.T) {
			expect, expectKeys := row.Expect, rowKeys.Expect
			if e, ok := row.ExpectByTaker["go"]; ok {
				expect, expectKeys = e, rowKeys.ExpectByTaker["go"]
				t.Logf("this taker's own expectation, because: %s", row.Why)
			}
			for key := range expectKeys {
				if !knownExpectKeys[key] {
					t.Fatalf("expect key %q is not checked by this runner: add its check", key)
				}
			}
			if expect.Signal != "" {
				t.Fatalf("no Go row may expect a signal (%s): the consumer region is sealed, so "+
					"no process can take the pages of a mapping away", expect.Signal)
			}
			// Others may enter it, as the C++ runner's: a row's fixture server may run as
			// another user (socket_of_another_user), and watches its socket from there.
			dir := runtimeDir(t)
			published := runFixture(t, row.Name, dir, false)
			timeout := 100 * time.Millisecond
			if row.Take.TimeoutMs != nil {
				timeout = time.Duration(*row.Take.TimeoutMs) * time.Millisecond
			}
			stage, code, message := "take", "ok", ""
			var got []uint64
			c, err := Open("conformance", WithRuntimeDir(dir), WithTimeout(timeout), WithRemotes())
			if err != nil {
				stage = "open"
			} else {
				// Closed below, before the region is read: Close publishes the last counts.
				defer c.Close()
				if len(row.AfterOpen) > 0 {
					if replaced := runFixture(t, row.Name, dir, true); len(replaced) > 0 {
						published = replaced
					}
				}
				if row.Take.Call == "next" {
					var id uint64
					if id, err = c.Next(); err == nil {
						got = []uint64{id}
					}
				} else {
					ids := make([]uint64, row.Take.Count)
					var n int
					if n, err = c.NextBatch(ids); err == nil {
						got = ids[:n]
					}
				}
			}
			if c != nil {
				c.Close()
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%v is not an *Error", err)
				}
				code, message = e.Code, e.Message
			}
			if stage != expect.Stage || code != expect.Code {
				t.Fatalf("got %s: %s (%s), want %s: %s", stage, code, message, expect.Stage, expect.Code)
			}
			if expect.Code != "ok" {
				action, known := actions[expect.Code]
				if !known {
					t.Fatalf("%s is no library error code of the vocabulary", expect.Code)
				}
				if errors.Is(err, ErrUnavailable) != (action == "fail_over") || Action(err) != action {
					t.Errorf("%s (action %s): errors.Is(err, ErrUnavailable) %v, Action %q",
						expect.Code, action, errors.Is(err, ErrUnavailable), Action(err))
				}
			}
			if !strings.Contains(message, expect.MessageContains) {
				t.Errorf("message %q lacks %q", message, expect.MessageContains)
			}
			if expect.Count != nil && len(got) != *expect.Count {
				t.Errorf("got %d IDs, want %d", len(got), *expect.Count)
			}
			if expect.IDs == "published" {
				if len(got) > len(published) {
					t.Fatalf("took %d IDs, the fixture published %d", len(got), len(published))
				}
				for i := range got {
					if got[i] != published[i] {
						t.Fatalf("ID %d is %d, the fixture published %d", i, got[i], published[i])
					}
				}
			}
			if expect.RefillHint == nil && expect.RefillRequestMin == nil && expect.Waiters == nil &&
				expect.Uncounted == nil && expect.ServiceTaken == nil {
				return
			}
			words := readRegionWords(t, dir)
			if expect.RefillHint != nil && words.RefillHint != *expect.RefillHint {
				t.Errorf("refill_hint %d, want %d", words.RefillHint, *expect.RefillHint)
			}
			if expect.RefillRequestMin != nil && words.RefillRequest < *expect.RefillRequestMin {
				t.Errorf("refill_request %d, want at least %d", words.RefillRequest,
					*expect.RefillRequestMin)
			}
			if expect.Waiters != nil && words.Waiters != *expect.Waiters {
				t.Errorf("waiters %d, want %d", words.Waiters, *expect.Waiters)
			}
			if expect.Uncounted != nil && words.Uncounted != *expect.Uncounted {
				t.Errorf("uncounted %d, want %d", words.Uncounted, *expect.Uncounted)
			}
			if expect.ServiceTaken != nil && !reflect.DeepEqual(words.ServiceTaken, expect.ServiceTaken) {
				t.Errorf("IDs taken per service %v, want %v", words.ServiceTaken, expect.ServiceTaken)
			}
		})
	}
}

// The package's copies of the vocabulary (errors.go, ring.go) are the C++ tables, as
// conformance_fixture --vocabulary prints them.
func TestVocabularyMatchesTheCppTables(t *testing.T) {
	tool := os.Getenv("SNOWFLAKE_CONFORMANCE_FIXTURE")
	if tool == "" {
		t.Fatal("SNOWFLAKE_CONFORMANCE_FIXTURE must name the conformance_fixture binary (ctest sets it)")
	}
	out, err := exec.Command(tool, "--vocabulary").Output()
	if err != nil {
		t.Fatal(err)
	}
	var cpp struct {
		Errors      []string `json:"errors"`
		Actions     []string `json:"error_actions"`
		States      []string `json:"states"`
		Health      []string `json:"health"`
		Reasons     []string `json:"reasons"`
		ReasonTexts []string `json:"reason_texts"`
	}
	if err := json.Unmarshal(out, &cpp); err != nil {
		t.Fatal(err)
	}
	var reasonTexts []string
	for r := range reasonCodes {
		reasonTexts = append(reasonTexts, describeReason(uint32(r), 5))
	}
	for _, c := range []struct {
		what      string
		cpp, mine []string
	}{
		{"error codes", cpp.Errors, statusCodes[1:]},
		{"error actions", cpp.Actions, statusActions[1:]},
		{"states", cpp.States, stateCodes[1:]},
		{"health", cpp.Health, healthCodes[:]},
		{"reasons", cpp.Reasons, reasonCodes[:]},
		{"reason texts", cpp.ReasonTexts, reasonTexts},
	} {
		if strings.Join(c.cpp, "|") != strings.Join(c.mine, "|") {
			t.Errorf("%s: C++ %q, Go %q", c.what, c.cpp, c.mine)
		}
	}
}
