//! `observe doctor`: what this host offers the jail, and what that means for isolation.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    /// Required checks failing make the jail impossible; others only weaken it.
    pub required: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Doctor {
    pub kernel: String,
    pub running_as_root: bool,
    pub checks: Vec<Check>,
    /// `full`, `reduced` (a hardening layer is missing) or `unavailable`.
    pub isolation: String,
}

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Forks a child that tries to create a user namespace, optionally after becoming `nobody`.
fn try_userns(as_nobody: bool) -> Result<(), String> {
    // SAFETY: the child makes only raw syscalls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: raw syscalls in the child, then _exit.
        unsafe {
            if as_nobody
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setresgid(65534, 65534, 65534) != 0
                    || libc::setresuid(65534, 65534, 65534) != 0)
            {
                libc::_exit(2);
            }
            let r = libc::unshare(
                libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET | libc::CLONE_NEWPID,
            );
            libc::_exit(if r == 0 { 0 } else { 1 });
        }
    }
    let mut st = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    match libc::WEXITSTATUS(st) {
        0 => Ok(()),
        2 => Err("could not drop to nobody to test".into()),
        _ => Err("unshare(CLONE_NEWUSER) refused".into()),
    }
}

fn landlock_abi() -> i64 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION query with null attributes.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    }
}

pub fn run() -> Doctor {
    // SAFETY: getter.
    let root = unsafe { libc::geteuid() } == 0;
    let kernel = read("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut checks = Vec::new();
    let mut add = |name: &str, ok: bool, required: bool, detail: String| {
        checks.push(Check {
            name: name.into(),
            ok,
            required,
            detail,
        })
    };

    let max_ns = read("/proc/sys/user/max_user_namespaces")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let self_ns = try_userns(false);
    add(
        "user_namespaces",
        self_ns.is_ok(),
        true,
        match &self_ns {
            Ok(()) => format!("this user can create user, mount, net and pid namespaces (max_user_namespaces={max_ns})"),
            Err(e) => format!("{e}; max_user_namespaces={max_ns}, unprivileged_userns_clone={}, apparmor_restrict_unprivileged_userns={}",
                read("/proc/sys/kernel/unprivileged_userns_clone").unwrap_or_else(|| "n/a".into()),
                read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").unwrap_or_else(|| "n/a".into())),
        },
    );
    if root {
        let unpriv = try_userns(true);
        add(
            "unprivileged_user_namespaces",
            unpriv.is_ok(),
            false,
            match unpriv {
                Ok(()) => {
                    "an unprivileged user can create user namespaces: observe runs without root"
                        .into()
                }
                Err(e) => format!("{e}: unprivileged workers cannot run the jail on this host"),
            },
        );
    }
    let abi = landlock_abi();
    add(
        "landlock",
        abi >= 1,
        false,
        if abi >= 1 {
            format!(
                "ABI {abi}{}",
                if abi >= 6 {
                    " (filesystem rules and signal/abstract-socket scoping)"
                } else {
                    " (filesystem rules; no scoping before ABI 6)"
                }
            )
        } else {
            "not available: the jail relies on mount namespaces and read-only mounts alone".into()
        },
    );
    let actions = read("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
    let seccomp_ok = ["user_notif", "trace", "trap", "errno"]
        .iter()
        .all(|a| actions.split_whitespace().any(|x| x == *a));
    add(
        "seccomp",
        seccomp_ok,
        true,
        if seccomp_ok {
            format!("filter actions available: {actions}")
        } else {
            format!("missing user_notif/trace/trap (have: {actions:?})")
        },
    );
    let (maj, min) = {
        let mut it = kernel
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse::<u32>().ok());
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let sync_wake = (maj, min) >= (6, 6);
    add(
        "seccomp_sync_wakeup",
        sync_wake,
        false,
        if sync_wake {
            "kernel >= 6.6: tracer wake-ups stay on the traced task's CPU".into()
        } else {
            "kernel < 6.6: tracing costs ~70 µs per event across CPUs".into()
        },
    );
    let addfd = (maj, min) >= (5, 14);
    add("seccomp_addfd", addfd, true, format!("kernel {kernel}: SECCOMP_ADDFD_FLAG_SEND needs >= 5.14 (the tracer hands replayed fds to tasks)"));
    let yama = read("/proc/sys/kernel/yama/ptrace_scope");
    let ptrace_ok = match yama.as_deref() {
        Some("3") => false,
        Some("2") => root,
        _ => true,
    };
    add(
        "ptrace",
        ptrace_ok,
        true,
        match yama {
            None => "no Yama LSM: the tracer can ptrace its jail".into(),
            Some(s) => format!(
                "yama ptrace_scope={s}{}",
                if ptrace_ok {
                    " (the tracer is the jail's ancestor: allowed)"
                } else {
                    ": the tracer cannot attach"
                }
            ),
        },
    );
    let cg2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let own_cg = read("/proc/self/cgroup").and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("0::"))
            .map(|l| l[3..].to_string())
    });
    let delegated = cg2
        && own_cg
            .as_ref()
            .map(|p| {
                let dir = format!("/sys/fs/cgroup{p}");
                let c = std::ffi::CString::new(dir).unwrap_or_default();
                // SAFETY: access() on a valid C string.
                unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
            })
            .unwrap_or(false);
    add(
        "cgroup_v2_delegation",
        delegated,
        false,
        if delegated {
            "cgroup v2 subtree writable: per-run memory/pids/cpu limits can use cgroups".into()
        } else if cg2 {
            "cgroup v2 present but our cgroup is not writable (see run_limits)".into()
        } else {
            "no cgroup v2 (v1 or none; see run_limits)".into()
        },
    );
    let (enforcement, how) = crate::limits::probe();
    add(
        "run_limits",
        enforcement != crate::limits::Enforcement::Rlimits,
        false,
        format!("{}: {how}", enforcement.as_str()),
    );
    let timens = std::path::Path::new("/proc/self/ns/time").exists();
    add(
        "time_namespaces",
        timens,
        false,
        if timens {
            "available (clock offsets for time-bomb passes)".into()
        } else {
            "not available".into()
        },
    );

    let required_ok = checks.iter().filter(|c| c.required).all(|c| c.ok);
    let all_ok = checks.iter().all(|c| {
        c.ok || c.name == "cgroup_v2_delegation"
            || c.name == "run_limits"
            || c.name == "unprivileged_user_namespaces"
            || c.name == "time_namespaces"
    });
    let isolation = if !required_ok {
        "unavailable"
    } else if all_ok {
        "full"
    } else {
        "reduced"
    };
    Doctor {
        kernel,
        running_as_root: root,
        checks,
        isolation: isolation.into(),
    }
}

impl Doctor {
    pub fn render(&self) -> String {
        let mut s = format!(
            "kernel {} ({})\n",
            self.kernel,
            if self.running_as_root {
                "running as root"
            } else {
                "running unprivileged"
            }
        );
        for c in &self.checks {
            s.push_str(&format!(
                "  [{}] {:<30} {}\n",
                if c.ok {
                    " ok "
                } else if c.required {
                    "FAIL"
                } else {
                    "warn"
                },
                c.name,
                c.detail
            ));
        }
        s.push_str(&format!("isolation: {}\n", self.isolation));
        s
    }

    pub fn usable(&self) -> bool {
        self.isolation != "unavailable"
    }
}
