/* The fake realtime clock injected into statically linked and Go programs (x86-64).
 * reprorun maps this page at a fixed address in the program at its exec, fills in the data
 * slots at 0x800, and points the vDSO's dynamic-symbol entries for clock_gettime,
 * gettimeofday and time at the entry points below (the vDSO's code is left intact). Other
 * clocks go to the original vDSO clock_gettime; the realtime clock is read from it too and
 * shifted by the offset (start-at), or the date is returned (frozen).
 * Assembled with GNU as into the CODE_* arrays of fakeclock.rs (a unit test checks they
 * agree). */
    .intel_syntax noprefix
    .text
/* 0x000: int clock_gettime(clockid_t clk = edi, struct timespec *ts = rsi) */
fake_clock_gettime:
    cmp edi, 0
    je 1f
    cmp edi, 5
    je 1f
    cmp edi, 11
    je 1f
    jmp qword ptr [rip + slot_vdso]     /* not a realtime clock: the vDSO's own */
1:
    cmp qword ptr [rip + slot_mode], 2
    je 3f
    push rsi                            /* keeps rsi, and the stack 16-byte aligned */
    call qword ptr [rip + slot_vdso]
    pop rsi
    test eax, eax
    jne 2f
    /* Two additions and one carry: the offset is split in the slots already (a division
     * here would wait for the vDSO's result, and the next read's would wait for it). */
    mov rcx, [rsi]
    mov rdx, [rsi + 8]
    add rcx, [rip + slot_offset_sec]
    add rdx, [rip + slot_offset_nsec]
    cmp rdx, 1000000000
    lea rdi, [rdx - 1000000000]
    cmovge rdx, rdi
    setge al                            /* eax is 0 here */
    movzx eax, al
    add rcx, rax
    mov [rsi], rcx
    mov [rsi + 8], rdx
    xor eax, eax
2:
    ret
3:
    mov rax, [rip + slot_epoch]
    mov [rsi], rax
    mov qword ptr [rsi + 8], 0
    xor eax, eax
    ret

    .org 0x100
/* 0x100: int gettimeofday(struct timeval *tv = rdi, struct timezone *tz = rsi) */
fake_gettimeofday:
    test rdi, rdi
    jz 1f
    push rsi
    mov rsi, rdi
    xor edi, edi
    call fake_clock_gettime
    mov rax, [rsi + 8]
    xor edx, edx
    mov ecx, 1000
    div rcx
    mov [rsi + 8], rax
    pop rsi
1:
    test rsi, rsi
    jz 2f
    mov qword ptr [rsi], 0
2:
    xor eax, eax
    ret

    .org 0x200
/* 0x200: time_t time(time_t *tloc = rdi) */
fake_time:
    push rdi
    sub rsp, 16
    mov rsi, rsp
    xor edi, edi
    call fake_clock_gettime
    mov rax, [rsp]
    add rsp, 16
    pop rdi
    test rdi, rdi
    jz 1f
    mov [rdi], rax
1:
    ret

    .org 0x800
slot_mode:   .quad 0     /* 1 start-at, 2 frozen */
slot_offset_sec: .quad 0 /* fake - real: whole seconds (rounded down) */
slot_epoch:  .quad 0     /* the date, seconds */
slot_vdso:   .quad 0     /* address of the vDSO's own clock_gettime */
slot_offset_nsec: .quad 0 /* fake - real: the nanoseconds beyond, 0 to 999999999 */
