#include "textflag.h"

// func int80Getpid() int32
TEXT ·int80Getpid(SB), NOSPLIT, $0-4
	MOVL $20, AX
	INT $0x80
	MOVL AX, ret+0(FP)
	RET
