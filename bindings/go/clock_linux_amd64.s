#include "textflag.h"

// func coarseRealtime(ts *timespec)
//
// clock_gettime(CLOCK_REALTIME_COARSE) through the vDSO, as the C++ take reads it: the
// coarse clock is a load of the kernel's data page, where a precise clock read on some
// virtual machines costs as much as a system call. The C code runs on this function's
// own 4 KiB frame (the prologue grows the goroutine stack to fit it), never below it.
// Without a vDSO it makes the system call.
TEXT ·coarseRealtime(SB),0,$4096-8
	MOVQ	ts+0(FP), SI
	MOVQ	runtime·vdsoClockgettimeSym(SB), AX
	TESTQ	AX, AX
	JZ	fallback
	MOVQ	SP, R12          // callee-saved in the C ABI
	LEAQ	4032(SP), SP     // the top of our frame: the C code's stack grows down into it
	ANDQ	$~15, SP         // the C ABI's alignment
	MOVL	$5, DI           // CLOCK_REALTIME_COARSE
	CALL	AX
	MOVQ	R12, SP
	RET
fallback:
	MOVL	$5, DI
	MOVL	$228, AX         // SYS_clock_gettime
	SYSCALL
	RET
