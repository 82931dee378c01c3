package snowflake

import "syscall"

// coarseRealtime reads CLOCK_REALTIME_COARSE (clock_linux_amd64.s).
//
//go:noescape
func coarseRealtime(ts *syscall.Timespec)

// coarseNowUnixMs is the take's clock (LAYOUT.md §7, Take, step 0).
func coarseNowUnixMs() int64 {
	var ts syscall.Timespec
	coarseRealtime(&ts)
	return ts.Sec*1000 + ts.Nsec/1_000_000
}
