//! The jail's seccomp filter, written as classic BPF by hand.
//!
//! Why not seccompiler: we need three return actions it does not emit (`USER_NOTIF` for the traced
//! calls, `TRACE` for exec, `TRAP` for foreign architectures so the tracer can record the kill), and
//! its arch check lets x32 numbers (>= 0x40000000) through. The program is small and pure, so it is
//! unit-tested here and exercised end to end by the jail tests.

use libc::sock_filter;

pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const RET_TRAP: u32 = 0x0003_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_TRACE: u32 = 0x7ff0_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
const ALU_AND_K: u16 = 0x54;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
fn off_arg_lo(i: u32) -> u32 {
    16 + 8 * i
}
fn off_arg_hi(i: u32) -> u32 {
    20 + 8 * i
}

/// Namespace-creating clone/unshare flags, including CLONE_NEWTIME.
pub const NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32
    | 0x80;

/// What the tracer does with a notified call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Recorded; emulated or continued.
    Observe,
    /// Escape-grade: recorded and refused with EPERM.
    Deny,
    /// Recorded and answered with success without doing anything (e.g. PR_SET_DUMPABLE, which
    /// would hide the task's memory from the tracer).
    Pretend,
}

pub const OBSERVED: &[i64] = &[
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_creat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rmdir,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_chmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_truncate,
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendmsg,
    libc::SYS_sendmmsg,
];

pub const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_setns,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_uselib,
];

/// `arch_prctl(ARCH_MAP_VDSO_X32 / _32 / _64)`: maps a fresh vDSO, one whose clock entries the
/// tracer has not switched (tracer/lazyclock.rs). Refused and recorded.
pub const ARCH_MAP_VDSO: std::ops::RangeInclusive<u64> = 0x2001..=0x2003;

/// Calls handled through ptrace (`SECCOMP_RET_TRACE`) so their result is seen at syscall exit.
pub const TRACED: &[i64] = &[libc::SYS_execve, libc::SYS_execveat];

pub fn classify(nr: i64, arg0: u64) -> Class {
    if DENIED.contains(&nr)
        || nr == libc::SYS_unshare
        || nr == libc::SYS_clone
        || (nr == libc::SYS_arch_prctl && ARCH_MAP_VDSO.contains(&arg0))
    {
        Class::Deny
    } else if nr == libc::SYS_prctl && arg0 == libc::PR_SET_DUMPABLE as u64 {
        Class::Pretend
    } else {
        Class::Observe
    }
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Builds the filter. `extra_notify` adds calls the tracer wants to see (e.g. `uname` under
/// darwin-sim).
pub fn build(extra_notify: &[i64]) -> Vec<sock_filter> {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, RET_TRAP),
        stmt(LD_W_ABS, OFF_NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, RET_TRAP),
    ];
    let simple = |p: &mut Vec<sock_filter>, nr: i64, ret: u32| {
        p.push(jump(JEQ_K, nr as u32, 0, 1));
        p.push(stmt(RET_K, ret));
    };
    for &nr in TRACED {
        simple(&mut p, nr, RET_TRACE);
    }
    for &nr in OBSERVED.iter().chain(extra_notify) {
        simple(&mut p, nr, RET_USER_NOTIF);
    }
    for &nr in DENIED {
        simple(&mut p, nr, RET_USER_NOTIF);
    }
    // glibc tries clone3 first and falls back to clone on ENOSYS; clone3's flags live in memory
    // the filter cannot read, so refuse it outright.
    simple(&mut p, libc::SYS_clone3, RET_ERRNO | libc::ENOSYS as u32);
    // clone/unshare: only namespace-creating flags are refused.
    for nr in [libc::SYS_clone, libc::SYS_unshare] {
        p.push(jump(JEQ_K, nr as u32, 0, 4));
        p.push(stmt(LD_W_ABS, off_arg_lo(0)));
        p.push(jump(JSET_K, NS_FLAGS, 0, 1));
        p.push(stmt(RET_K, RET_USER_NOTIF));
        p.push(stmt(RET_K, RET_ALLOW));
    }
    // arch_prctl(ARCH_MAP_VDSO_*) would map a vDSO with the real clock.
    p.push(jump(JEQ_K, libc::SYS_arch_prctl as u32, 0, 5));
    p.push(stmt(LD_W_ABS, off_arg_lo(0)));
    p.push(jump(JGE_K, *ARCH_MAP_VDSO.start() as u32, 0, 2));
    p.push(jump(JGE_K, *ARCH_MAP_VDSO.end() as u32 + 1, 1, 0));
    p.push(stmt(RET_K, RET_USER_NOTIF));
    p.push(stmt(RET_K, RET_ALLOW));
    // prctl(PR_SET_DUMPABLE, ...) would hide the task's memory from the tracer.
    p.push(jump(JEQ_K, libc::SYS_prctl as u32, 0, 4));
    p.push(stmt(LD_W_ABS, off_arg_lo(0)));
    p.push(jump(JEQ_K, libc::PR_SET_DUMPABLE as u32, 0, 1));
    p.push(stmt(RET_K, RET_USER_NOTIF));
    p.push(stmt(RET_K, RET_ALLOW));
    // sendto with a destination address (both halves of the pointer, so an address mapped at
    // 0x1_0000_0000 cannot hide).
    p.push(jump(JEQ_K, libc::SYS_sendto as u32, 0, 7));
    p.push(stmt(LD_W_ABS, off_arg_lo(4)));
    p.push(jump(JEQ_K, 0, 1, 0));
    p.push(stmt(RET_K, RET_USER_NOTIF));
    p.push(stmt(LD_W_ABS, off_arg_hi(4)));
    p.push(jump(JEQ_K, 0, 1, 0));
    p.push(stmt(RET_K, RET_USER_NOTIF));
    p.push(stmt(RET_K, RET_ALLOW));
    time_rules(&mut p);
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

/// Timed waits whose timeout is a register at least this long (ms) stop for ptrace.
pub const LONG_WAIT_MS: u32 = 1000;

/// Appends `if nr == X { body }` (the body must end in a return).
fn guarded(p: &mut Vec<sock_filter>, nr: i64, body: &[sock_filter]) {
    p.push(jump(JEQ_K, nr as u32, 0, body.len() as u8));
    p.extend_from_slice(body);
}

/// `RET_TRACE` when the pointer argument `i` is not NULL (both halves checked).
fn trace_if_pointer(i: u32) -> [sock_filter; 7] {
    [
        stmt(LD_W_ABS, off_arg_lo(i)),
        jump(JEQ_K, 0, 1, 0),
        stmt(RET_K, RET_TRACE),
        stmt(LD_W_ABS, off_arg_hi(i)),
        jump(JEQ_K, 0, 1, 0),
        stmt(RET_K, RET_TRACE),
        stmt(RET_K, RET_ALLOW),
    ]
}

/// Virtual time (tracer/clock.rs): clock reads and sleeps go to the tracer; waits with a long
/// timeout stop for ptrace so the timeout can be shortened and the rest skipped. CPU-time clocks
/// are left alone, and so are waits without a timeout or with a short one, which keeps the cost
/// off the hot paths (futex without timeout, epoll_wait(0)).
fn time_rules(p: &mut Vec<sock_filter>) {
    for nr in [libc::SYS_gettimeofday, libc::SYS_time, libc::SYS_nanosleep] {
        guarded(p, nr, &[stmt(RET_K, RET_USER_NOTIF)]);
    }
    // clock id in arg 0: 2 and 3 are the CPU clocks, negative ids are per-process CPU clocks.
    for nr in [libc::SYS_clock_gettime, libc::SYS_clock_nanosleep] {
        guarded(
            p,
            nr,
            &[
                stmt(LD_W_ABS, off_arg_lo(0)),
                jump(JEQ_K, 2, 3, 0),
                jump(JEQ_K, 3, 2, 0),
                jump(JSET_K, 0x8000_0000, 1, 0),
                stmt(RET_K, RET_USER_NOTIF),
                stmt(RET_K, RET_ALLOW),
            ],
        );
    }
    // int timeouts in ms: negative means forever.
    for (nr, arg) in [
        (libc::SYS_poll, 2),
        (libc::SYS_epoll_wait, 3),
        (libc::SYS_epoll_pwait, 3),
    ] {
        guarded(
            p,
            nr,
            &[
                stmt(LD_W_ABS, off_arg_lo(arg)),
                jump(JSET_K, 0x8000_0000, 2, 0),
                jump(JGE_K, LONG_WAIT_MS, 0, 1),
                stmt(RET_K, RET_TRACE),
                stmt(RET_K, RET_ALLOW),
            ],
        );
    }
    // Timeouts behind a pointer: the tracer reads them.
    for (nr, arg) in [
        (libc::SYS_select, 4),
        (libc::SYS_pselect6, 4),
        (libc::SYS_ppoll, 2),
        (libc::SYS_epoll_pwait2, 3),
    ] {
        guarded(p, nr, &trace_if_pointer(arg));
    }
    // futex: only FUTEX_WAIT and FUTEX_WAIT_BITSET with a timeout.
    let mut futex = vec![
        stmt(LD_W_ABS, off_arg_lo(1)),
        stmt(ALU_AND_K, 0x7f),
        jump(JEQ_K, libc::FUTEX_WAIT as u32, 1, 0),
        jump(JEQ_K, libc::FUTEX_WAIT_BITSET as u32, 0, 6),
    ];
    futex.extend_from_slice(&trace_if_pointer(3));
    guarded(p, libc::SYS_futex, &futex);
}

pub fn syscall_name(nr: i64) -> &'static str {
    match nr {
        libc::SYS_open => "open",
        libc::SYS_openat => "openat",
        libc::SYS_openat2 => "openat2",
        libc::SYS_creat => "creat",
        libc::SYS_unlink => "unlink",
        libc::SYS_unlinkat => "unlinkat",
        libc::SYS_rmdir => "rmdir",
        libc::SYS_mkdir => "mkdir",
        libc::SYS_mkdirat => "mkdirat",
        libc::SYS_rename => "rename",
        libc::SYS_renameat => "renameat",
        libc::SYS_renameat2 => "renameat2",
        libc::SYS_link => "link",
        libc::SYS_linkat => "linkat",
        libc::SYS_symlink => "symlink",
        libc::SYS_symlinkat => "symlinkat",
        libc::SYS_chmod => "chmod",
        libc::SYS_fchmodat => "fchmodat",
        libc::SYS_fchmodat2 => "fchmodat2",
        libc::SYS_truncate => "truncate",
        libc::SYS_connect => "connect",
        libc::SYS_bind => "bind",
        libc::SYS_listen => "listen",
        libc::SYS_sendto => "sendto",
        libc::SYS_sendmsg => "sendmsg",
        libc::SYS_sendmmsg => "sendmmsg",
        libc::SYS_execve => "execve",
        libc::SYS_execveat => "execveat",
        libc::SYS_ptrace => "ptrace",
        libc::SYS_process_vm_readv => "process_vm_readv",
        libc::SYS_process_vm_writev => "process_vm_writev",
        libc::SYS_mount => "mount",
        libc::SYS_umount2 => "umount2",
        libc::SYS_pivot_root => "pivot_root",
        libc::SYS_chroot => "chroot",
        libc::SYS_bpf => "bpf",
        libc::SYS_perf_event_open => "perf_event_open",
        libc::SYS_kexec_load => "kexec_load",
        libc::SYS_kexec_file_load => "kexec_file_load",
        libc::SYS_init_module => "init_module",
        libc::SYS_finit_module => "finit_module",
        libc::SYS_delete_module => "delete_module",
        libc::SYS_keyctl => "keyctl",
        libc::SYS_add_key => "add_key",
        libc::SYS_request_key => "request_key",
        libc::SYS_io_uring_setup => "io_uring_setup",
        libc::SYS_io_uring_enter => "io_uring_enter",
        libc::SYS_io_uring_register => "io_uring_register",
        libc::SYS_userfaultfd => "userfaultfd",
        libc::SYS_open_by_handle_at => "open_by_handle_at",
        libc::SYS_name_to_handle_at => "name_to_handle_at",
        libc::SYS_setns => "setns",
        libc::SYS_unshare => "unshare",
        libc::SYS_clone => "clone",
        libc::SYS_clone3 => "clone3",
        libc::SYS_prctl => "prctl",
        libc::SYS_uname => "uname",
        libc::SYS_swapon => "swapon",
        libc::SYS_swapoff => "swapoff",
        libc::SYS_reboot => "reboot",
        libc::SYS_fsopen => "fsopen",
        libc::SYS_fsmount => "fsmount",
        libc::SYS_fsconfig => "fsconfig",
        libc::SYS_fspick => "fspick",
        libc::SYS_move_mount => "move_mount",
        libc::SYS_open_tree => "open_tree",
        libc::SYS_mount_setattr => "mount_setattr",
        libc::SYS_acct => "acct",
        libc::SYS_quotactl => "quotactl",
        libc::SYS_syslog => "syslog",
        libc::SYS_iopl => "iopl",
        libc::SYS_ioperm => "ioperm",
        libc::SYS_uselib => "uselib",
        libc::SYS_clock_gettime => "clock_gettime",
        libc::SYS_gettimeofday => "gettimeofday",
        libc::SYS_time => "time",
        libc::SYS_nanosleep => "nanosleep",
        libc::SYS_clock_nanosleep => "clock_nanosleep",
        libc::SYS_poll => "poll",
        libc::SYS_ppoll => "ppoll",
        libc::SYS_select => "select",
        libc::SYS_pselect6 => "pselect6",
        libc::SYS_epoll_wait => "epoll_wait",
        libc::SYS_epoll_pwait => "epoll_pwait",
        libc::SYS_epoll_pwait2 => "epoll_pwait2",
        libc::SYS_futex => "futex",
        libc::SYS_arch_prctl => "arch_prctl",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny classic-BPF interpreter, enough for the instructions `build` emits, so the filter's
    /// decisions are tested without installing it.
    fn run(p: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for a in args {
            data.extend_from_slice(&a.to_ne_bytes());
        }
        let mut a: u32 = 0;
        let mut pc = 0usize;
        loop {
            let i = p[pc];
            match i.code {
                LD_W_ABS => {
                    let k = i.k as usize;
                    a = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                JEQ_K | JGE_K | JSET_K => {
                    let t = match i.code {
                        JEQ_K => a == i.k,
                        JGE_K => a >= i.k,
                        _ => a & i.k != 0,
                    };
                    pc += 1 + if t { i.jt as usize } else { i.jf as usize };
                }
                ALU_AND_K => {
                    a &= i.k;
                    pc += 1;
                }
                RET_K => return i.k,
                c => panic!("unexpected op {c:#x}"),
            }
        }
    }

    fn nr(n: i64) -> u32 {
        n as u32
    }

    #[test]
    fn decisions() {
        let p = build(&[]);
        let x = AUDIT_ARCH_X86_64;
        assert_eq!(run(&p, x, nr(libc::SYS_read), [0; 6]), RET_ALLOW);
        assert_eq!(run(&p, x, nr(libc::SYS_openat), [0; 6]), RET_USER_NOTIF);
        assert_eq!(run(&p, x, nr(libc::SYS_execve), [0; 6]), RET_TRACE);
        assert_eq!(run(&p, x, nr(libc::SYS_ptrace), [0; 6]), RET_USER_NOTIF);
        assert_eq!(run(&p, x, nr(libc::SYS_clone3), [0; 6]), RET_ERRNO | 38);
        // i386 int 0x80 and x32 numbers trap.
        assert_eq!(run(&p, 0x4000_0003, 5, [0; 6]), RET_TRAP);
        assert_eq!(
            run(&p, x, 0x4000_0000 | nr(libc::SYS_openat), [0; 6]),
            RET_TRAP
        );
        // clone: plain fork allowed, namespace flags refused.
        let fork_flags = (libc::CLONE_CHILD_SETTID | libc::SIGCHLD) as u64;
        assert_eq!(
            run(&p, x, nr(libc::SYS_clone), [fork_flags, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let ns = (libc::CLONE_NEWUSER) as u64;
        assert_eq!(
            run(&p, x, nr(libc::SYS_clone), [ns, 0, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(
            run(&p, x, nr(libc::SYS_unshare), [0x80, 0, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(
            run(
                &p,
                x,
                nr(libc::SYS_unshare),
                [libc::CLONE_FILES as u64, 0, 0, 0, 0, 0]
            ),
            RET_ALLOW
        );
        // sendto: only with a destination address, whichever half of the pointer is set.
        assert_eq!(
            run(&p, x, nr(libc::SYS_sendto), [3, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(
            run(&p, x, nr(libc::SYS_sendto), [3, 0, 0, 0, 0x1000, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(
            run(&p, x, nr(libc::SYS_sendto), [3, 0, 0, 0, 0x1_0000_0000, 0]),
            RET_USER_NOTIF
        );
        // prctl: only PR_SET_DUMPABLE.
        assert_eq!(
            run(
                &p,
                x,
                nr(libc::SYS_prctl),
                [libc::PR_SET_NAME as u64, 0, 0, 0, 0, 0]
            ),
            RET_ALLOW
        );
        assert_eq!(
            run(
                &p,
                x,
                nr(libc::SYS_prctl),
                [libc::PR_SET_DUMPABLE as u64, 0, 0, 0, 0, 0]
            ),
            RET_USER_NOTIF
        );
        // arch_prctl: ARCH_MAP_VDSO_* refused, the rest (ARCH_SET_FS, …) allowed.
        for (opt, want) in [
            (0x1002u64, RET_ALLOW),
            (0x2000, RET_ALLOW),
            (0x2001, RET_USER_NOTIF),
            (0x2003, RET_USER_NOTIF),
            (0x2004, RET_ALLOW),
        ] {
            assert_eq!(
                run(&p, x, nr(libc::SYS_arch_prctl), [opt, 0, 0, 0, 0, 0]),
                want,
                "{opt:#x}"
            );
            assert_eq!(
                classify(libc::SYS_arch_prctl, opt) == Class::Deny,
                want == RET_USER_NOTIF
            );
        }
        assert!(p.len() < 4096);
    }

    #[test]
    fn time_calls() {
        let p = build(&[]);
        let x = AUDIT_ARCH_X86_64;
        let call = |n: i64, args: [u64; 6]| run(&p, x, nr(n), args);
        // Clock reads: wall and steady clocks go to the tracer, CPU clocks do not.
        assert_eq!(call(libc::SYS_clock_gettime, [0; 6]), RET_USER_NOTIF);
        assert_eq!(
            call(libc::SYS_clock_gettime, [1, 0, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(libc::SYS_clock_gettime, [2, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(libc::SYS_clock_gettime, [3, 0, 0, 0, 0, 0]), RET_ALLOW);
        let per_pid_cpu = (-6i64) as u64;
        assert_eq!(
            call(libc::SYS_clock_gettime, [per_pid_cpu, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(call(libc::SYS_gettimeofday, [0; 6]), RET_USER_NOTIF);
        assert_eq!(call(libc::SYS_time, [0; 6]), RET_USER_NOTIF);
        assert_eq!(call(libc::SYS_nanosleep, [0; 6]), RET_USER_NOTIF);
        assert_eq!(
            call(libc::SYS_clock_nanosleep, [1, 1, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(libc::SYS_clock_getres, [0; 6]), RET_ALLOW);
        // int timeouts: long ones stop for ptrace, short and infinite ones do not.
        assert_eq!(
            call(libc::SYS_epoll_wait, [3, 0, 8, 900_000, 0, 0]),
            RET_TRACE
        );
        assert_eq!(call(libc::SYS_epoll_wait, [3, 0, 8, 10, 0, 0]), RET_ALLOW);
        let forever = (-1i32) as u32 as u64;
        assert_eq!(
            call(libc::SYS_epoll_wait, [3, 0, 8, forever, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(call(libc::SYS_poll, [0, 0, 5000, 0, 0, 0]), RET_TRACE);
        assert_eq!(call(libc::SYS_poll, [0, 0, 0, 0, 0, 0]), RET_ALLOW);
        // Pointer timeouts: any non-NULL pointer, either half.
        assert_eq!(call(libc::SYS_select, [0, 0, 0, 0, 0x7ff0, 0]), RET_TRACE);
        assert_eq!(
            call(libc::SYS_select, [0, 0, 0, 0, 0x7f_0000_0000, 0]),
            RET_TRACE
        );
        assert_eq!(call(libc::SYS_select, [1, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(libc::SYS_ppoll, [0, 0, 0x1000, 0, 0, 0]), RET_TRACE);
        // futex: timed waits only; a private-flagged wait counts too.
        let wait_private = (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as u64;
        assert_eq!(
            call(libc::SYS_futex, [0x10, wait_private, 0, 0x1000, 0, 0]),
            RET_TRACE
        );
        assert_eq!(
            call(libc::SYS_futex, [0x10, wait_private, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let bitset = (libc::FUTEX_WAIT_BITSET | libc::FUTEX_CLOCK_REALTIME) as u64;
        assert_eq!(
            call(libc::SYS_futex, [0x10, bitset, 0, 0x1000, 0, 0]),
            RET_TRACE
        );
        let wake = libc::FUTEX_WAKE as u64;
        assert_eq!(
            call(libc::SYS_futex, [0x10, wake, 1, 0x1000, 0, 0]),
            RET_ALLOW
        );
    }

    #[test]
    fn extra_notify() {
        let p = build(&[libc::SYS_uname]);
        assert_eq!(
            run(&p, AUDIT_ARCH_X86_64, nr(libc::SYS_uname), [0; 6]),
            RET_USER_NOTIF
        );
        let p = build(&[]);
        assert_eq!(
            run(&p, AUDIT_ARCH_X86_64, nr(libc::SYS_uname), [0; 6]),
            RET_ALLOW
        );
    }
}
