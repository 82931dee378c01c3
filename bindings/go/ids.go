package snowflake

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Layout is an ID layout (shm/include/snowflake/id_layout.h): the epoch and how the 63
// bits below the sign bit split into milliseconds since the epoch (TimeBits, the highest),
// the machine number (MachineBits) and the sequence within the millisecond (SequenceBits).
// A platform fixes it for the life of its epoch; the daemon records it in its segment's
// header, and a Client decodes by the header's (Client.Layout), never by constants.
type Layout struct {
	Epoch                               time.Time
	TimeBits, MachineBits, SequenceBits int
}

// The bounds of each width (id_layout.h: kMinTimeBits ...): a header whose bits leave them
// is corrupt.
const (
	minTimeBits     = 40
	maxTimeBits     = 44
	minMachineBits  = 1
	maxMachineBits  = 16
	minSequenceBits = 6
)

// DefaultLayout is the layout of IDs unless the daemons set another: 41/10/12 from
// DefaultEpoch.
var DefaultLayout = Layout{Epoch: DefaultEpoch, TimeBits: 41, MachineBits: 10, SequenceBits: 12}

// Decoded is the fields of an ID.
type Decoded struct {
	Time     time.Time // the creation millisecond (UTC)
	UnixMs   int64
	Machine  uint32 // below 2^MachineBits of the layout
	Sequence uint32 // below 2^SequenceBits of the layout
}

// DefaultEpoch is the epoch of IDs unless the daemons set another: 2026-01-01T00:00:00Z.
var DefaultEpoch = time.UnixMilli(1_767_225_600_000).UTC()

// String is the layout's bits as configs write them: "41/10/12".
func (l Layout) String() string {
	return fmt.Sprintf("%d/%d/%d", l.TimeBits, l.MachineBits, l.SequenceBits)
}

// validBits is IsValidIdBits: the widths fill 63 bits, each within its bounds.
func validBits(t, m, s int) bool {
	return t+m+s == 63 && t >= minTimeBits && t <= maxTimeBits && m >= minMachineBits &&
		m <= maxMachineBits && s >= minSequenceBits
}

// check returns the layout's epoch in ms, or an error for bits that are no layout or an
// epoch whose range does not fit.
func (l Layout) check() (int64, *Error) {
	if !validBits(l.TimeBits, l.MachineBits, l.SequenceBits) {
		return 0, newError(statusInvalidArgument, "not a layout: "+l.String()+": time, machine and "+
			"sequence bits must add up to 63, with time 40-44, machine 1-16 and sequence 6 or "+
			"more bits (docs/id-layout.md)")
	}
	epochMs := l.Epoch.UnixMilli()
	if epochMs < 0 || epochMs > math.MaxInt64-l.maxOffsetMs() {
		return 0, newError(statusInvalidArgument, "epoch out of range: it must be a "+
			"non-negative Unix time in milliseconds whose range in "+strconv.Itoa(l.TimeBits)+
			" time bits fits")
	}
	return epochMs, nil
}

func (l Layout) timeShift() uint    { return uint(l.MachineBits + l.SequenceBits) }
func (l Layout) maxOffsetMs() int64 { return 1<<l.TimeBits - 1 }

// Decode splits id with the layout of c's daemon (its epoch and bits). Errors:
// ErrInvalidArgument (the sign bit is set: no ID), ErrClosed.
func (c *Client) Decode(id uint64) (Decoded, error) {
	if c.closed.Load() {
		return Decoded{}, ErrClosed
	}
	if id >= 1<<63 {
		return Decoded{}, invalidArgument(strconv.FormatUint(id, 10) +
			": not an ID: the sign bit (bit 63) is set, IDs are below 2^63")
	}
	l := c.Layout()
	return decode(id, l.Epoch.UnixMilli(), l), nil
}

func decode(id uint64, epochMs int64, l Layout) Decoded {
	ms := epochMs + int64(id>>l.timeShift())
	return Decoded{Time: time.UnixMilli(ms).UTC(), UnixMs: ms,
		Machine:  uint32(id>>uint(l.SequenceBits)) & (1<<l.MachineBits - 1),
		Sequence: uint32(id) & (1<<l.SequenceBits - 1)}
}

// Decode splits id with the default layout. Errors: ErrInvalidArgument.
func Decode(id uint64) (Decoded, error) { return DefaultLayout.Decode(id) }

// DecodeWithEpoch splits id with the daemons' [id] epoch and the default bits. Errors:
// ErrInvalidArgument (no ID, or an epoch before 1970 or too late).
func DecodeWithEpoch(id uint64, epoch time.Time) (Decoded, error) {
	l := DefaultLayout
	l.Epoch = epoch
	return l.Decode(id)
}

// Decode splits id with the layout (the C ABI's sf_decode_in, checking in its order: the
// bits, the epoch, then the ID). Errors: ErrInvalidArgument (bits that are no layout, an
// epoch before 1970 or too late, or no ID).
func (l Layout) Decode(id uint64) (Decoded, error) {
	epochMs, err := l.check()
	if err != nil {
		return Decoded{}, err
	}
	if id >= 1<<63 {
		return Decoded{}, invalidArgument(strconv.FormatUint(id, 10) +
			": not an ID: the sign bit (bit 63) is set, IDs are below 2^63")
	}
	return decode(id, epochMs, l), nil
}

// IDBounds is the IDs of a time range, for `WHERE id BETWEEN First AND Last`.
type IDBounds struct {
	FirstID, LastID uint64
	// The range as used: raised to the epoch, lowered to its last millisecond.
	First, Last time.Time
}

// Bounds returns the smallest and largest IDs any machine makes from `from` to `to`
// (both included, millisecond resolution) with the default layout. Errors:
// ErrInvalidArgument (from after to), ErrTimeOutOfRange (no ID of the epoch can carry
// any time of the range).
func Bounds(from, to time.Time) (IDBounds, error) {
	return DefaultLayout.Bounds(from, to)
}

// BoundsWithEpoch is Bounds with the daemons' [id] epoch and the default bits (the C
// ABI's sf_bounds).
func BoundsWithEpoch(epoch, from, to time.Time) (IDBounds, error) {
	l := DefaultLayout
	l.Epoch = epoch
	return l.Bounds(from, to)
}

// Bounds is the package's Bounds in the layout l (the C ABI's sf_bounds_in); a Client's
// is c.Layout().
func (l Layout) Bounds(from, to time.Time) (IDBounds, error) {
	epochMs, err := l.check()
	if err != nil {
		return IDBounds{}, invalidArgument("sf_bounds: " + err.Message)
	}
	fromMs, toMs := from.UnixMilli(), to.UnixMilli()
	maxMs := epochMs + l.maxOffsetMs()
	switch {
	case fromMs > toMs:
		return IDBounds{}, invalidArgument("sf_bounds: the time range ends before it begins: " +
			"its start must not be later than its end")
	case toMs < epochMs:
		return IDBounds{}, newError(statusTimeOutOfRange, "sf_bounds: time is before the "+
			"epoch: IDs cannot carry a millisecond earlier than the epoch")
	case fromMs > maxMs:
		return IDBounds{}, newError(statusTimeOutOfRange, "sf_bounds: time is beyond the "+
			"range of the layout's time bits after the epoch: no more IDs can be numbered "+
			"with this epoch")
	}
	first, last := fromMs, toMs
	if first < epochMs {
		first = epochMs
	}
	if last > maxMs {
		last = maxMs
	}
	everyMachineAndSequence := uint64(1)<<l.timeShift() - 1
	return IDBounds{FirstID: uint64(first-epochMs) << l.timeShift(),
		LastID: uint64(last-epochMs)<<l.timeShift() | everyMachineAndSequence,
		First:  time.UnixMilli(first).UTC(), Last: time.UnixMilli(last).UTC()}, nil
}
