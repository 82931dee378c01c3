package snowflake

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"testing"
)

// The package reads the segment natively, so it copies the C++ layout
// (shm/include/snowflake/segment_layout.h) as Go constants: one definition per wire format
// means those copies are checked against it, not trusted. conformance_fixture --layout
// prints the definitions (offsetof and sizeof on the C++ structs, and the constants
// themselves), keyed by the C++ expression; layoutFacts pairs each key with the Go
// constant that copies it.
//
// The lists are kept honest in both directions, so neither side can grow alone:
//   - a row whose key the tool does not print fails: the C++ field or constant was renamed
//     or removed, and the Go copy now copies nothing;
//   - a key the tool prints that no row checks fails: the tool prints only what a native
//     taker reads, so a field added there is one Go must copy (and this table check);
//   - a constant of Go's layout blocks (layoutBlocks) that no row names fails, so a new Go
//     copy cannot be added unchecked.
// What no test can see is a C++ field Go reads but --layout does not print: a field a
// native taker reads is declared for it in the tool's Layout(), beside the others.

type layoutFact struct {
	cpp    string // the key conformance_fixture --layout prints: the C++ expression
	goName string // the Go constant that copies it (or the Go expression, for a stride)
	n      uint64
	s      string
	isText bool
}

func layoutNum(cpp, goName string, v uint64) layoutFact {
	return layoutFact{cpp: cpp, goName: goName, n: v}
}

func layoutText(cpp, goName, v string) layoutFact {
	return layoutFact{cpp: cpp, goName: goName, s: v, isText: true}
}

var layoutFacts = []layoutFact{
	// The ring file, the consumer region and their identity (LAYOUT.md §1-3, §5).
	layoutText("kSegmentFileName", "segmentFileName", segmentFileName),
	layoutNum("kMagic", "layoutMagic", layoutMagic),
	layoutNum("kVersion", "layoutVersion", layoutVersion),
	layoutNum("kPageSize", "pageSize", pageSize),
	layoutNum("sizeof(SegmentHeader)", "headerSize", headerSize),
	layoutNum("kSlotsOffset", "slotsOffset", slotsOffset),
	layoutNum("kMinCapacity", "minCapacity", minCapacity),
	layoutNum("kMaxCapacity", "maxCapacity", maxCapacity),
	layoutNum("kConsumerRegionSize", "regionSize", regionSize),
	layoutNum("kConsumerRegionSeals", "consumerRegionSeals", consumerRegionSeals),

	// The header (LAYOUT.md §3).
	layoutNum("offsetof(SegmentHeader, magic)", "offMagic", offMagic),
	layoutNum("offsetof(SegmentHeader, version)", "offVersion", offVersion),
	layoutNum("offsetof(SegmentHeader, header_size)", "offHeaderSize", offHeaderSize),
	layoutNum("offsetof(SegmentHeader, capacity)", "offCapacity", offCapacity),
	layoutNum("offsetof(SegmentHeader, segment_size)", "offSegmentSize", offSegmentSize),
	layoutNum("offsetof(SegmentHeader, segment_id)", "offSegmentID", offSegmentID),
	layoutNum("offsetof(SegmentHeader, slots_offset)", "offSlotsOffset", offSlotsOffset),
	layoutNum("offsetof(SegmentHeader, epoch_unix_ms)", "offEpoch", offEpoch),
	layoutNum("offsetof(SegmentHeader, machine)", "offMachine", offMachine),
	layoutNum("offsetof(SegmentHeader, tail)", "offTail", offTail),
	layoutNum("offsetof(SegmentHeader, wake_seq)", "offWakeSeq", offWakeSeq),
	layoutNum("offsetof(SegmentHeader, last_published_id)", "offLastPublished", offLastPublished),
	layoutNum("offsetof(SegmentHeader, state)", "offState", offState),
	layoutNum("offsetof(SegmentHeader, reason)", "offReason", offReason),
	layoutNum("offsetof(SegmentHeader, reason_detail)", "offReasonDetail", offReasonDetail),
	layoutNum("offsetof(SegmentHeader, heartbeat_mono_ns)", "offHeartbeat", offHeartbeat),
	layoutNum("offsetof(SegmentHeader, pid)", "offPID", offPID),
	layoutNum("offsetof(SegmentHeader, incarnation)", "offIncarnation", offIncarnation),
	layoutNum("offsetof(SegmentHeader, published_total)", "offPublished", offPublished),
	layoutNum("offsetof(SegmentHeader, drained_total)", "offDrained", offDrained),
	layoutNum("offsetof(SegmentHeader, clock_pauses)", "offClockPauses", offClockPauses),
	layoutNum("offsetof(SegmentHeader, fill_target)", "offFillTarget", offFillTarget),
	layoutNum("offsetof(SegmentHeader, max_age_ms)", "offMaxAgeMs", offMaxAgeMs),
	layoutNum("offsetof(SegmentHeader, liveness_ms)", "offLivenessMs", offLivenessMs),
	layoutNum("offsetof(SegmentHeader, freshness_bound_ms)", "offFreshnessMs", offFreshnessMs),
	layoutNum("offsetof(SegmentHeader, pid_namespace)", "offPidNamespace", offPidNamespace),
	layoutNum("offsetof(SegmentHeader, boot_id_high)", "offBootHigh", offBootHigh),
	layoutNum("offsetof(SegmentHeader, boot_id_low)", "offBootLow", offBootLow),
	layoutNum("offsetof(SegmentHeader, status_text_seq)", "offStatusTextSeq", offStatusTextSeq),
	layoutNum("offsetof(SegmentHeader, status_text)", "offStatusText", offStatusText),
	layoutNum("kStatusTextBytes", "statusTextBytes", statusTextBytes),
	layoutNum("kStatusTextReadTries", "statusTextReadTries", statusTextReadTries),
	layoutNum("DaemonState::kStarting", "stateStarting", stateStarting),
	layoutNum("DaemonState::kServing", "stateServing", stateServing),
	layoutNum("DaemonState::kPaused", "statePaused", statePaused),
	layoutNum("DaemonState::kOutOfService", "stateOOS", stateOOS),
	layoutNum("DaemonState::kStopped", "stateStopped", stateStopped),

	// The consumer region (LAYOUT.md §4).
	layoutNum("offsetof(ConsumerRegion, head)", "offHead", offHead),
	layoutNum("offsetof(ConsumerRegion, refill_request)", "offRefillRequest", offRefillRequest),
	layoutNum("offsetof(ConsumerRegion, refill_hint)", "offRefillHint", offRefillHint),
	layoutNum("offsetof(ConsumerRegion, waiters)", "offWaiters", offWaiters),
	layoutNum("offsetof(ConsumerRegion, uncounted)", "offUncounted", offUncounted),
	layoutNum("offsetof(ConsumerRegion, segment_id)", "offConsumerSegID", offConsumerSegID),
	layoutNum("offsetof(ConsumerRegion, services)", "offServices", offServices),
	layoutNum("kServiceSlotCount", "serviceSlots", serviceSlots),
	layoutNum("sizeof(ServiceSlot)", "serviceSlotSize", serviceSlotSize),
	layoutNum("offsetof(ServiceSlot, owner_pid)", "offOwnerPID", offOwnerPID),
	layoutNum("offsetof(ServiceSlot, name_ready)", "offNameReady", offNameReady),
	layoutNum("offsetof(ServiceSlot, taken)", "offTaken", offTaken),
	layoutNum("offsetof(ServiceSlot, name)", "offName", offName),
	layoutNum("sizeof(ServiceSlot::name)", "serviceNameBytes", serviceNameBytes),
	layoutNum("kServiceNameMax", "serviceNameMax", serviceNameMax),
	layoutNum("kServiceSlotActive", "serviceSlotActive", serviceSlotActive),
	layoutNum("kServiceSlotRetired", "serviceSlotRetired", serviceSlotRetired),
	layoutNum("offsetof(ConsumerRegion, lanes)", "offLanes", offLanes),
	layoutNum("kLanesPerService", "lanesPerService", lanesPerService),
	layoutNum("sizeof(ConsumerRegion::lanes[0])", "lanesPerService*laneSize", lanesPerService*laneSize),
	layoutNum("sizeof(CounterLane)", "laneSize", laneSize),
	layoutNum("offsetof(CounterLane, taken)", "offLaneTaken", offLaneTaken),

	// A slot holds an ID; a take reads its millisecond by the header's id_bits (LAYOUT.md §3),
	// packed as PackIdBits packs it, and refuses widths beyond id_layout.h's bounds.
	layoutNum("offsetof(SegmentHeader, id_bits)", "offIDBits", offIDBits),
	layoutNum("PackIdBits(snowflake::kDefaultIdBits)", "packIDBits(DefaultLayout)",
		uint64(packIDBits(DefaultLayout))),
	layoutNum("snowflake::kMinTimeBits", "minTimeBits", minTimeBits),
	layoutNum("snowflake::kMaxTimeBits", "maxTimeBits", maxTimeBits),
	layoutNum("snowflake::kMinMachineBits", "minMachineBits", minMachineBits),
	layoutNum("snowflake::kMaxMachineBits", "maxMachineBits", maxMachineBits),
	layoutNum("snowflake::kMinSequenceBits", "minSequenceBits", minSequenceBits),
}

// The const blocks that copy the layout, each found by one of its constants: every
// constant declared in them must have a row.
var layoutBlocks = []struct{ file, member string }{
	{"segment.go", "offMagic"},
	{"ring.go", "stateServing"},
	{"ids.go", "minTimeBits"},
}

// The names declared by the const block of `file` that declares `member`.
func constBlock(t *testing.T, file, member string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		var names []string
		found := false
		for _, spec := range gen.Specs {
			for _, name := range spec.(*ast.ValueSpec).Names {
				names = append(names, name.Name)
				found = found || name.Name == member
			}
		}
		if found {
			return names
		}
	}
	t.Fatalf("%s declares no const %s: layoutBlocks finds the layout's constants by it; "+
		"name a constant of the block that now holds them", file, member)
	return nil
}

func layoutValue(n uint64) string { return fmt.Sprintf("%d (%#x)", n, n) }

func TestSegmentLayoutMatchesTheCppDefinitions(t *testing.T) {
	tool := os.Getenv("SNOWFLAKE_CONFORMANCE_FIXTURE")
	if tool == "" {
		t.Fatal("SNOWFLAKE_CONFORMANCE_FIXTURE must name the conformance_fixture binary (ctest sets it)")
	}
	out, err := exec.Command(tool, "--layout").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("%s --layout: %v: %s(a build older than --layout? rebuild conformance_fixture)",
				tool, err, exit.Stderr)
		}
		t.Fatal(err)
	}
	var cpp map[string]json.RawMessage
	if err := json.Unmarshal(out, &cpp); err != nil {
		t.Fatalf("%s --layout printed no JSON object (%v): %q", tool, err, out)
	}

	checked := map[string]bool{}
	named := map[string]bool{}
	for _, f := range layoutFacts {
		if checked[f.cpp] {
			t.Errorf("layoutFacts checks %s twice: remove one row", f.cpp)
		}
		checked[f.cpp] = true
		named[f.goName] = true
		raw, ok := cpp[f.cpp]
		if !ok {
			t.Errorf("conformance_fixture --layout prints no %s, which Go's %s copies: the C++ "+
				"definition was renamed or removed; follow it in bindings/go (the constant, its "+
				"uses and its row here) and in the tool's Layout()", f.cpp, f.goName)
			continue
		}
		if f.isText {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || s != f.s {
				t.Errorf("Go's %s is %q, but C++ %s is %s: change %s to the C++ value (the "+
					"layout is defined once, in segment_layout.h)", f.goName, f.s, f.cpp, raw, f.goName)
			}
			continue
		}
		n, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			t.Errorf("conformance_fixture --layout prints %s = %s: not an unsigned integer", f.cpp, raw)
			continue
		}
		if n != f.n {
			t.Errorf("Go's %s is %s, but C++ %s is %s: change %s to the C++ value (the layout "+
				"is defined once, in segment_layout.h; a change there bumps kVersion, LAYOUT.md §8)",
				f.goName, layoutValue(f.n), f.cpp, layoutValue(n), f.goName)
		}
	}

	var unchecked []string
	for key := range cpp {
		if !checked[key] {
			unchecked = append(unchecked, key)
		}
	}
	sort.Strings(unchecked)
	for _, key := range unchecked {
		t.Errorf("conformance_fixture --layout prints %s = %s, which no row of layoutFacts "+
			"checks: the tool prints what a native taker reads, so give bindings/go a constant "+
			"for it (segment.go) and a row here", key, cpp[key])
	}

	for _, b := range layoutBlocks {
		for _, name := range constBlock(t, b.file, b.member) {
			if !named[name] {
				t.Errorf("%s declares the layout constant %s, which no row of layoutFacts checks: "+
					"add a row with the C++ definition it copies (printed by conformance_fixture "+
					"--layout; add it to the tool's Layout() if it is not)", b.file, name)
			}
		}
	}
}
