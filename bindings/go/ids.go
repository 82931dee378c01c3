package snowflake

import (
	"math"
	"strconv"
	"time"
)

// The ID layout (shm/include/snowflake/id_layout.h): 41 bits of milliseconds since the
// epoch, 10 bits of machine, 12 bits of sequence, the sign bit 0.
const maxTimeOffsetMs = 1<<41 - 1

// Decoded is the fields of an ID.
type Decoded struct {
	Time     time.Time // the creation millisecond (UTC)
	UnixMs   int64
	Machine  uint32 // 0..1023
	Sequence uint32 // 0..4095
}

// DefaultEpoch is the epoch of IDs unless the daemons set another: 2026-01-01T00:00:00Z.
var DefaultEpoch = time.UnixMilli(1_767_225_600_000).UTC()

// Decode splits id with the epoch of c's daemon. Errors: ErrInvalidArgument (the sign
// bit is set: no ID), ErrClosed.
func (c *Client) Decode(id uint64) (Decoded, error) {
	if c.closed.Load() {
		return Decoded{}, ErrClosed
	}
	if id >= 1<<63 {
		return Decoded{}, invalidArgument(strconv.FormatUint(id, 10) +
			": not an ID: the sign bit (bit 63) is set, IDs are below 2^63")
	}
	return decode(id, c.epochMs()), nil
}

func decode(id uint64, epochMs int64) Decoded {
	ms := epochMs + int64(id>>timeShift)
	return Decoded{Time: time.UnixMilli(ms).UTC(), UnixMs: ms, Machine: uint32(id>>12) & 1023,
		Sequence: uint32(id) & 4095}
}

// Decode splits id with the default epoch. Errors: ErrInvalidArgument.
func Decode(id uint64) (Decoded, error) { return DecodeWithEpoch(id, DefaultEpoch) }

// DecodeWithEpoch splits id with the daemons' [id] epoch. Errors: ErrInvalidArgument
// (no ID, or an epoch before 1970 or too late).
func DecodeWithEpoch(id uint64, epoch time.Time) (Decoded, error) {
	if id >= 1<<63 {
		return Decoded{}, invalidArgument("the sign bit is set: no ID")
	}
	epochMs := epoch.UnixMilli()
	if epochMs < 0 || epochMs > math.MaxInt64-maxTimeOffsetMs {
		return Decoded{}, invalidArgument("epoch out of range: it must be from 1970 on")
	}
	return decode(id, epochMs), nil
}

// IDBounds is the IDs of a time range, for `WHERE id BETWEEN First AND Last`.
type IDBounds struct {
	FirstID, LastID uint64
	// The range as used: raised to the epoch, lowered to its last millisecond.
	First, Last time.Time
}

// Bounds returns the smallest and largest IDs any machine makes from `from` to `to`
// (both included, millisecond resolution) with the default epoch. Errors:
// ErrInvalidArgument (from after to), ErrTimeOutOfRange (no ID of the epoch can carry
// any time of the range).
func Bounds(from, to time.Time) (IDBounds, error) {
	return BoundsWithEpoch(DefaultEpoch, from, to)
}

// BoundsWithEpoch is Bounds with the daemons' [id] epoch (the C ABI's sf_bounds).
func BoundsWithEpoch(epoch, from, to time.Time) (IDBounds, error) {
	epochMs, fromMs, toMs := epoch.UnixMilli(), from.UnixMilli(), to.UnixMilli()
	if epochMs < 0 || epochMs > math.MaxInt64-maxTimeOffsetMs {
		return IDBounds{}, invalidArgument("sf_bounds: epoch out of range: it must be a " +
			"non-negative Unix time in milliseconds, at most 2^63-2^41")
	}
	maxMs := epochMs + maxTimeOffsetMs
	switch {
	case fromMs > toMs:
		return IDBounds{}, invalidArgument("sf_bounds: the time range ends before it begins: " +
			"its start must not be later than its end")
	case toMs < epochMs:
		return IDBounds{}, newError(statusTimeOutOfRange, "sf_bounds: time is before the "+
			"epoch: IDs cannot carry a millisecond earlier than the epoch")
	case fromMs > maxMs:
		return IDBounds{}, newError(statusTimeOutOfRange, "sf_bounds: time is beyond the "+
			"41-bit range of the epoch (69.7 years after it): no more IDs can be numbered "+
			"with this epoch")
	}
	first, last := fromMs, toMs
	if first < epochMs {
		first = epochMs
	}
	if last > maxMs {
		last = maxMs
	}
	return IDBounds{FirstID: uint64(first-epochMs) << timeShift,
		LastID: uint64(last-epochMs)<<timeShift | 1023<<12 | 4095,
		First:  time.UnixMilli(first).UTC(), Last: time.UnixMilli(last).UTC()}, nil
}
