package snowflake

// The segment, opened, checked and mapped as shm/LAYOUT.md §1 lists the steps (the C++
// MappedSegment::Open, whose messages these are): the ring file from the runtime
// directory, and the consumer region from the descriptor the daemon hands over its control
// socket (attach.go). Every offset below is the layout's, pinned on the C++ side by
// static_asserts and here by TestSegmentLayoutMatchesTheCppDefinitions (layout_test.go),
// which compares each constant of the block below with the C++ definition it copies, and
// by the conformance suite, which maps fixtures written by the C++ layout.

import (
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const (
	segmentFileName = "snowflake.ring"

	layoutMagic   = 0x014b4c46574f4e53 // "SNOWFLK" then 0x01
	layoutVersion = 5
	pageSize      = 4096
	headerSize    = 4096
	slotsOffset   = 4096
	minCapacity   = 1
	maxCapacity   = 1 << 20
	// The consumer region: a memfd of exactly this size, sealed with exactly these seals
	// (F_SEAL_SEAL 0x1 | F_SEAL_SHRINK 0x2 | F_SEAL_GROW 0x4), so no process can resize it
	// while others map it.
	regionSize          = 163840
	consumerRegionSeals = 0x7

	// Header (ring file).
	offMagic         = 0
	offVersion       = 8
	offHeaderSize    = 12
	offCapacity      = 16
	offSegmentSize   = 24
	offSegmentID     = 32
	offSlotsOffset   = 40
	offEpoch         = 48
	offMachine       = 56
	offIDBits        = 60
	offTail          = 64
	offWakeSeq       = 72
	offLastPublished = 80
	offState         = 128
	offReason        = 132
	offReasonDetail  = 136
	offHeartbeat     = 144
	offPID           = 152
	offIncarnation   = 160
	offPublished     = 192
	offDrained       = 200
	offClockPauses   = 208
	offFillTarget    = 216
	offMaxAgeMs      = 256
	offLivenessMs    = 260
	offFreshnessMs   = 264
	offPidNamespace  = 268
	offBootHigh      = 272
	offBootLow       = 280
	offStatusTextSeq = 320
	offStatusText    = 328
	// The status text's size, and how often a reader tries before it gives up on a text
	// that keeps changing (snowflake/status_text.h, kStatusTextBytes and
	// kStatusTextReadTries).
	statusTextBytes     = 448
	statusTextReadTries = 64

	// Consumer region.
	offHead          = 0
	offRefillRequest = 64
	offRefillHint    = 68
	offWaiters       = 72
	offUncounted     = 80
	offConsumerSegID = 88
	offServices      = 128
	serviceSlotSize  = 128
	serviceSlots     = 255
	offLanes         = 32768
	lanesPerService  = 8
	laneSize         = 64
	// Within a service slot.
	offOwnerPID      = 0
	offNameReady     = 8
	offTaken         = 16
	offName          = 64
	serviceNameBytes = 64 // NUL-padded, 8 bytes per word
	// Within a lane.
	offLaneTaken = 0

	serviceSlotActive  = 1
	serviceSlotRetired = 2
	serviceNameMax     = 63
)

// The segment-level conditions of LAYOUT.md §1; each maps to a library status.
type segmentError int

const (
	segNotFound segmentError = iota
	segPermissionDenied
	segNotRegularFile
	segWrongOwner
	segModeTooOpen
	segTruncated
	segBadMagic
	segIncompatibleVersion
	segSizeMismatch
	segBadCapacity
	segBadLayout // id_bits no layout, or an epoch whose range overflows (kBadEpoch)
	segCorruptCounters
	segUnpaired
	segEarlierBoot
	segUnsealed // the consumer region's descriptor is not sealed as the layout says
	segBadReply // an answer to attach this library's protocol does not allow: another release
	segSystemError
)

// The C++ FromSegmentError.
func (s segmentError) status() int {
	switch s {
	case segNotFound, segUnpaired, segEarlierBoot:
		return statusDaemonNotRunning
	case segPermissionDenied:
		return statusPermissionDenied
	case segIncompatibleVersion, segBadReply:
		return statusIncompatibleVersion
	case segNotRegularFile, segWrongOwner, segModeTooOpen, segUnsealed:
		return statusUntrustedSegment
	case segTruncated, segBadMagic, segSizeMismatch, segBadCapacity, segBadLayout,
		segCorruptCounters:
		return statusCorruptSegment
	}
	return statusSystemError
}

func segFail(kind segmentError, message string) *Error {
	return newError(kind.status(), message)
}

// region is one read-only or read-write mapping; word addresses are computed from it.
type region []byte

func (r region) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r[off])) }
func (r region) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&r[off])) }

// segment is the three mappings of one segment: header and slots from the ring file,
// the consumer region from the descriptor attach received (nil before attach, and in the
// ring-only view Status takes of a daemon that does not answer).
type segment struct {
	path     string // the ring file
	dir      string // the runtime directory
	owner    uint32 // the daemon's user: the ring file's owner
	header   region // read-only
	slots    region // read-only
	consumer region // read-write
	capacity uint64
	dev, ino uint64
}

func (s *segment) unmap() {
	for _, r := range []region{s.header, s.slots, s.consumer} {
		if r != nil {
			syscall.Munmap(r)
		}
	}
	s.header, s.slots, s.consumer = nil, nil, nil
}

// The current boot's id (LAYOUT.md §3, line 4): the first and last 16 hex digits of
// /proc/sys/kernel/random/boot_id; zero when unreadable (then every segment is accepted).
func currentBootID() (uint64, uint64) {
	bootOnce.Do(func() {
		if data, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootHigh, bootLow = parseBootID(string(data))
		}
	})
	return bootHigh, bootLow
}

var (
	bootOnce          sync.Once
	bootHigh, bootLow uint64
	pidNsOnce         sync.Once
	pidNs             uint32
)

func parseBootID(text string) (high, low uint64) {
	digits := 0
	for _, c := range text {
		var v uint64
		switch {
		case c == '-' || c == '\n':
			continue
		case c >= '0' && c <= '9':
			v = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			v = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v = uint64(c-'A') + 10
		default:
			return 0, 0
		}
		if digits < 16 {
			high = high<<4 | v
		} else {
			low = low<<4 | v
		}
		digits++
		if digits > 32 {
			return 0, 0
		}
	}
	if digits != 32 {
		return 0, 0
	}
	return high, low
}

func formatBootID(high, low uint64) string {
	if high == 0 && low == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", high>>32, high>>16&0xffff, high&0xffff,
		low>>48, low&0xffffffffffff)
}

// The inode of this process's pid namespace, 0 if unknown (LAYOUT.md §3, line 4).
func currentPidNamespace() uint32 {
	pidNsOnce.Do(func() {
		var st syscall.Stat_t
		if syscall.Stat("/proc/self/ns/pid", &st) == nil && st.Ino != 0 && st.Ino <= 1<<32-1 {
			pidNs = uint32(st.Ino)
		}
	})
	return pidNs
}

func describeUser(uid uint32) string {
	number := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(number); err == nil && u.Username != number {
		return u.Username + " (uid " + number + ")"
	}
	return "uid " + number
}

func describeGroup(gid uint32) string {
	number := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(number); err == nil && g.Name != number {
		return "group '" + g.Name + "' (gid " + number + ")"
	}
	return "gid " + number
}

// The C++ GroupAccessAdvice: joining the group, or in a user namespace that does not map
// it, mapping it.
func groupAccessAdvice(gid uint32, onHost string) string {
	overflow := uint32(65534)
	if data, err := os.ReadFile("/proc/sys/kernel/overflowgid"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 32); err == nil {
			overflow = uint32(v)
		}
	}
	g := strconv.FormatUint(uint64(gid), 10)
	if gid == overflow {
		return "the group shows as the overflow gid " + g + ", so this process runs in a user " +
			"namespace that does not map the daemon's group: map that group into the namespace " +
			"under its own number (podman --gidmap GID:GID:1, with the ranges around it) and give " +
			"it to this process; joining a group inside the namespace cannot help"
	}
	return onHost + " (a container: run it with the group, e.g. podman --group-add " + g +
		" or Kubernetes securityContext.supplementalGroups: [" + g + "])"
}

// openChecked runs LAYOUT.md §1 steps 1–7 on the ring file: it opens it read-only.
func openChecked(path string, owner uint32, missing segmentError,
	missingMessage string) (int, syscall.Stat_t, *Error) {
	var link syscall.Stat_t
	if err := syscall.Lstat(path, &link); err != nil {
		switch err {
		case syscall.ENOENT:
			return -1, link, segFail(missing, missingMessage)
		case syscall.EACCES:
			dir := filepath.Dir(path)
			var dirInfo syscall.Stat_t
			if syscall.Stat(dir, &dirInfo) != nil {
				return -1, link, segFail(segPermissionDenied, "permission denied reading "+dir+
					": add this user to its group and log in again")
			}
			return -1, link, segFail(segPermissionDenied, "permission denied reading "+dir+" ("+
				describeGroup(dirInfo.Gid)+"): "+groupAccessAdvice(dirInfo.Gid,
				"add this user to "+describeGroup(dirInfo.Gid)+" and log in again"))
		}
		return -1, link, segFail(segSystemError, "cannot stat "+path+": "+err.Error())
	}
	if link.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return -1, link, segFail(segNotRegularFile, path+" is not a regular file (a symlink, "+
			"directory or device); refusing to map it")
	}
	if link.Uid != owner {
		return -1, link, segFail(segWrongOwner, path+" is owned by "+describeUser(link.Uid)+
			", expected "+describeUser(owner)+" (the daemon's user); refusing to trust it")
	}
	mode := fmt.Sprintf("%04o", link.Mode&07777)
	if link.Mode&0007 != 0 {
		return -1, link, segFail(segModeTooOpen, path+" has mode "+mode+", open to other users; "+
			"refusing to trust it (the daemon creates the ring file 0640)")
	}
	if link.Mode&0020 != 0 {
		return -1, link, segFail(segModeTooOpen, path+" has mode "+mode+": its group may write "+
			"it, so any member could forge IDs; refusing to trust it (the daemon creates it 0640)")
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		switch err {
		case syscall.EACCES, syscall.EPERM:
			return -1, link, segFail(segPermissionDenied, "permission denied opening "+path+
				" (mode "+mode+", "+describeGroup(link.Gid)+"): "+groupAccessAdvice(link.Gid,
				"add this user to "+describeGroup(link.Gid)+" and log in again"))
		case syscall.ENOENT:
			return -1, link, segFail(missing, path+" disappeared while opening it: snowflaked "+
				"is restarting or stopped; retry")
		}
		return -1, link, segFail(segSystemError, "cannot open "+path+": "+err.Error())
	}
	var info syscall.Stat_t
	if syscall.Fstat(fd, &info) != nil || info.Ino != link.Ino || info.Dev != link.Dev {
		syscall.Close(fd)
		return -1, link, segFail(missing, path+" was replaced while opening it; retry")
	}
	return fd, info, nil
}

func segmentSizeFor(capacity uint64) uint64 {
	return slotsOffset + (capacity*8+pageSize-1)/pageSize*pageSize
}

// validateHeader is LAYOUT.md §3's validation at open, in its order.
func validateHeader(h region, fileSize uint64, path string) (uint64, *Error) {
	magic := loadU64(h, offMagic)
	if magic != layoutMagic {
		what := "is zero: never initialised"
		if magic != 0 {
			what = fmt.Sprintf("0x%016x", magic)
		}
		return 0, segFail(segBadMagic, path+": not a snowflake segment (magic "+what+
			"); remove it and restart snowflaked")
	}
	if v := loadU32(h, offVersion); v != layoutVersion {
		return 0, segFail(segIncompatibleVersion, fmt.Sprintf("%s: segment format version %d, "+
			"this build speaks version %d; run a daemon and client library of the same release",
			path, v, layoutVersion))
	}
	if loadU32(h, offHeaderSize) != headerSize || loadU64(h, offSlotsOffset) != slotsOffset {
		return 0, segFail(segSizeMismatch, fmt.Sprintf("%s: header sizes or offsets differ "+
			"from format version %d; the file is corrupt", path, layoutVersion))
	}
	capacity := loadU64(h, offCapacity)
	if capacity < minCapacity || capacity&(capacity-1) != 0 || capacity > maxCapacity {
		return 0, segFail(segBadCapacity, fmt.Sprintf("%s: capacity %d is not a power of two "+
			"from %d to %d; the file is corrupt", path, capacity, minCapacity, maxCapacity))
	}
	// Every take shifts by the layout's bits and counts from the epoch (LAYOUT.md §3).
	if bits := loadU32(h, offIDBits); !isIDBitsWord(bits) {
		return 0, segFail(segBadLayout, fmt.Sprintf("%s: id_bits 0x%08x is no ID layout; the "+
			"file is corrupt", path, bits))
	}
	t, m, s := unpackIDBits(loadU32(h, offIDBits))
	layout := Layout{Epoch: time.UnixMilli(int64(loadU64(h, offEpoch))), TimeBits: t,
		MachineBits: m, SequenceBits: s}
	if epoch := loadU64(h, offEpoch); epoch > math.MaxInt64 {
		return 0, segFail(segBadLayout, fmt.Sprintf("%s: epoch %d ms is no ID layout's; the "+
			"file is corrupt", path, epoch))
	} else if _, e := layout.check(); e != nil {
		return 0, segFail(segBadLayout, fmt.Sprintf("%s: epoch %d ms is no ID layout's "+
			"(its range overflows); the file is corrupt", path, epoch))
	}
	expected := segmentSizeFor(capacity)
	if declared := loadU64(h, offSegmentSize); declared != expected {
		return 0, segFail(segSizeMismatch, fmt.Sprintf("%s: header declares %d bytes but "+
			"capacity %d needs %d; the file is corrupt", path, declared, capacity, expected))
	}
	if fileSize < expected {
		return 0, segFail(segTruncated, fmt.Sprintf("%s: file is %d bytes, its header needs %d; "+
			"it was truncated", path, fileSize, expected))
	}
	if fileSize > expected {
		return 0, segFail(segSizeMismatch, fmt.Sprintf("%s: file is %d bytes, its header says "+
			"%d; it was resized", path, fileSize, expected))
	}
	return capacity, nil
}

func mapRegion(fd int, offset int64, length int, writable bool, path string) (region, *Error) {
	prot := syscall.PROT_READ
	if writable {
		prot |= syscall.PROT_WRITE
	}
	data, err := syscall.Mmap(fd, offset, length, prot, syscall.MAP_SHARED)
	if err != nil {
		return nil, segFail(segSystemError, "cannot map "+path+": mmap: "+err.Error())
	}
	return region(data), nil
}

// openRing maps runtimeDir's ring file (LAYOUT.md §1, the ring file's steps): the
// header and the slots, read-only, checked; the consumer region is attach's.
func openRing(runtimeDir string) (*segment, *Error) {
	var dirInfo syscall.Stat_t
	if err := syscall.Stat(runtimeDir, &dirInfo); err != nil {
		if err == syscall.ENOENT {
			return nil, segFail(segNotFound, "no runtime directory "+runtimeDir+": snowflaked "+
				"is not running here (start it, or set SNOWFLAKE_RUNTIME_DIR to its runtime directory)")
		}
		kind := segSystemError
		if err == syscall.EACCES {
			kind = segPermissionDenied
		}
		return nil, segFail(kind, "cannot stat "+runtimeDir+": "+err.Error())
	}
	owner := dirInfo.Uid // the expected owner: the runtime directory's
	path := filepath.Join(runtimeDir, segmentFileName)

	fd, info, e := openChecked(path, owner, segNotFound,
		"no segment at "+path+": snowflaked is not running for this runtime directory (start "+
			"it, or point SNOWFLAKE_RUNTIME_DIR at the right one)")
	if e != nil {
		return nil, e
	}
	defer syscall.Close(fd)
	s := &segment{path: path, dir: runtimeDir, owner: info.Uid, dev: info.Dev, ino: info.Ino}
	ok := false
	defer func() {
		if !ok {
			s.unmap()
		}
	}()
	fileSize := uint64(info.Size)
	if fileSize < slotsOffset {
		return nil, segFail(segTruncated, fmt.Sprintf("%s: file is %d bytes, shorter than its "+
			"header (%d); it was truncated", path, fileSize, slotsOffset))
	}
	if s.header, e = mapRegion(fd, 0, headerSize, false, path); e != nil {
		return nil, e
	}
	if s.capacity, e = validateHeader(s.header, fileSize, path); e != nil {
		return nil, e
	}
	if high, low := currentBootID(); high != 0 || low != 0 {
		rh, rl := loadU64(s.header, offBootHigh), loadU64(s.header, offBootLow)
		// An unknown one (zero: an older daemon of this format) is accepted: its heartbeat
		// and pid still tell whether it serves.
		if (rh != 0 || rl != 0) && (rh != high || rl != low) {
			return nil, segFail(segEarlierBoot, path+" was left by an earlier boot of this host "+
				"(boot id "+formatBootID(rh, rl)+", this boot is "+formatBootID(high, low)+
				"); snowflaked is not running (start it: it replaces the segment)")
		}
	}
	if s.slots, e = mapRegion(fd, slotsOffset, int(fileSize-slotsOffset), false, path); e != nil {
		return nil, e
	}
	ok = true
	return s, nil
}

// How often openSegment maps a ring file and attaches again when the region it received
// belongs to another segment than the ring file (a daemon replacing its segment between
// the two steps), before it reports the segment unpaired.
const pairingTries = 5

// mayAnswer: whether a daemon in this health answers attach. One that stopped, died or
// stopped heartbeating does not, and its ring file says so to every take.
func mayAnswer(h health) bool {
	return h != healthStopped && h != healthDead && h != healthNotHeartbeating
}

// openSegment maps runtimeDir's segment for a client: the ring file (openRing), then the
// consumer region the daemon hands over (attach.go), then checks the two belong together
// (attach step 8) and the counters (LAYOUT.md §5). Refusals the daemon asks to retry are
// retried until deadline (attachRegion). A daemon that does not answer (its header says
// stopped, dead or not heartbeating; or no socket, nothing listening) leaves the ring file
// mapped alone, without the region (consumer nil): every take then reports what its header
// says, and a take attaches once the daemon serves (Client.attachRegion). maxAge: the
// Client's heartbeat limit (0: the daemon's own).
func openSegment(runtimeDir string, maxAge time.Duration, deadline time.Time) (*segment, *Error) {
	for try := 1; ; try++ {
		s, e := openRing(runtimeDir)
		if e != nil {
			return nil, e
		}
		r := newRing(s)
		limit := r.heartbeatLimit(maxAge)
		gone := func() bool { return !mayAnswer(r.checkProducer(limit).health) }
		if gone() {
			return s, nil
		}
		replyID, absent, e := attachRegion(s, deadline, gone)
		if absent {
			return s, nil
		}
		if e != nil {
			s.unmap()
			return nil, e
		}
		ringID, regionID := loadU64(s.header, offSegmentID), loadU64(s.consumer, offConsumerSegID)
		if ringID == replyID && regionID == replyID {
			if e := validateCounters(s); e != nil {
				s.unmap()
				return nil, e
			}
			return s, nil
		}
		s.unmap()
		if try == pairingTries {
			return nil, segFail(segUnpaired, fmt.Sprintf("the consumer region %s handed over "+
				"belongs to another segment than %s (segment id %d, the reply said %d, the ring "+
				"file has %d) in %d tries: snowflaked is replacing the segment; retry",
				controlSocketPath(runtimeDir), s.path, regionID, replyID, ringID, pairingTries))
		}
		time.Sleep(time.Millisecond) // let the daemon finish the replacement
	}
}

// validateCounters: head read before and after tail (LAYOUT.md §5).
func validateCounters(s *segment) *Error {
	headBefore := loadU64(s.consumer, offHead)
	tail := loadU64(s.header, offTail)
	headAfter := loadU64(s.consumer, offHead)
	if headBefore > tail || tail > headAfter+s.capacity {
		return segFail(segCorruptCounters, fmt.Sprintf("%s: counters are inconsistent (head %d, "+
			"tail %d, capacity %d); refusing it: stop snowflaked, remove the file, restart",
			s.path, headBefore, tail, s.capacity))
	}
	return nil
}
