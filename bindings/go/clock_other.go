//go:build linux && !amd64

package snowflake

import (
	"syscall"
	"unsafe"
)

// coarseNowUnixMs is the take's clock (LAYOUT.md §7, Take, step 0): CLOCK_REALTIME_COARSE,
// by a system call where this package has no vDSO call of its own (clock_linux_amd64.s).
func coarseNowUnixMs() int64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 5, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1000 + ts.Nsec/1_000_000
}
