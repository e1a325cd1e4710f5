//! Hand-written traces for unit tests: a builder that writes events the way the tracer and the
//! egress capture do, in a realistic Linux (or macOS-like) jail layout.

use crate::analyse::{analyse, AnalyseConfig};
use crate::model::{Category, StaticSource, StaticView};
use crate::report::Report;
use crate::trace::{
    CredentialEnv, CredentialFile, Event, EventKind, FileOp, NetOp, RunContext, SysResult, Trace,
    TraceHeader,
};

pub const HOME: &str = "/home/alice";
pub const WS: &str = "/home/alice/project";
pub const SKILL: &str = "/home/alice/.claude/skills/demo";

#[derive(Clone)]
pub struct T {
    pub header: TraceHeader,
    pub events: Vec<Event>,
    seq: u64,
    t: u64,
}

pub fn context(home: &str) -> RunContext {
    RunContext {
        home: home.into(),
        workspace: format!("{home}/project"),
        skill_dir: format!("{home}/.claude/skills/demo"),
        other_skill_dirs: vec![format!("{home}/.claude/skills/sibling")],
        agent_files: vec![
            format!("{home}/.claude/settings.json"),
            format!("{home}/.claude/CLAUDE.md"),
        ],
        temp_dirs: vec!["/tmp".into()],
        path_dirs: vec![
            format!("{home}/.local/bin"),
            "/usr/local/bin".into(),
            "/usr/bin".into(),
            "/bin".into(),
        ],
        credential_files: vec![
            CredentialFile {
                path: format!("{home}/.ssh/id_ed25519"),
                credential: "ssh-key".into(),
                service_hosts: vec!["github.com".into()],
            },
            CredentialFile {
                path: format!("{home}/.aws/credentials"),
                credential: "aws".into(),
                service_hosts: vec!["amazonaws.com".into()],
            },
            CredentialFile {
                path: format!("{home}/.config/gh/hosts.yml"),
                credential: "gh-cli".into(),
                service_hosts: vec!["api.github.com".into(), "github.com".into()],
            },
            CredentialFile {
                path: format!("{home}/.npmrc"),
                credential: "npm".into(),
                service_hosts: vec!["registry.npmjs.org".into()],
            },
            CredentialFile {
                path: format!("{home}/.netrc"),
                credential: "netrc".into(),
                service_hosts: vec!["api.heroku.com".into()],
            },
        ],
        credential_env: vec![
            CredentialEnv {
                name: "GITHUB_TOKEN".into(),
                credential: "github-token".into(),
                service_hosts: vec!["api.github.com".into(), "github.com".into()],
            },
            CredentialEnv {
                name: "OPENAI_API_KEY".into(),
                credential: "openai".into(),
                service_hosts: vec!["api.openai.com".into()],
            },
        ],
        creds_seed: Some("seed".into()),
    }
}

pub fn statics(cats: &[Category], hosts: &[&str]) -> StaticView {
    StaticView {
        source: StaticSource::Imported,
        categories: cats.to_vec(),
        declared_hosts: hosts.iter().map(|h| h.to_string()).collect(),
    }
}

pub fn none() -> StaticView {
    statics(&[], &[])
}

impl T {
    pub fn new() -> T {
        T::with_os("linux", HOME)
    }

    pub fn darwin() -> T {
        T::with_os("darwin-sim", "/Users/alice")
    }

    pub fn with_os(os: &str, home: &str) -> T {
        let mut header = TraceHeader::new(
            "run-1",
            os,
            Some("demo".into()),
            "2026-01-01T00:00:00Z".into(),
        );
        header.skill_digest = Some("ab".repeat(32));
        header.fidelity = Some("bundle".into());
        header.context = context(home);
        T {
            header,
            events: vec![],
            seq: 0,
            t: 0,
        }
    }

    pub fn ev(&mut self, pid: i32, step: Option<u32>, kind: EventKind) -> u64 {
        self.seq += 1;
        self.t += 1_000_000;
        self.events.push(Event {
            seq: self.seq,
            t_ns: self.t,
            pid,
            tid: None,
            ppid: None,
            vpid: None,
            step,
            kind,
        });
        self.seq
    }

    pub fn step(&mut self, step: u32, label: &str) -> u64 {
        self.ev(
            1,
            Some(step),
            EventKind::StepStart {
                label: label.into(),
                argv: vec![],
            },
        )
    }

    pub fn step_end(&mut self, step: u32) -> u64 {
        self.ev(
            1,
            Some(step),
            EventKind::StepEnd {
                exit_code: Some(0),
                signal: None,
                timed_out: false,
            },
        )
    }

    pub fn spawn(&mut self, parent: i32, child: i32, step: u32) -> u64 {
        self.ev(
            parent,
            Some(step),
            EventKind::Spawn {
                parent,
                child,
                thread: false,
            },
        )
    }

    pub fn exec(&mut self, pid: i32, step: u32, path: &str, argv: &[&str]) -> u64 {
        self.exec_res(pid, step, path, argv, SysResult::ok(0))
    }

    pub fn exec_res(
        &mut self,
        pid: i32,
        step: u32,
        path: &str,
        argv: &[&str],
        result: SysResult,
    ) -> u64 {
        let exe = result.is_ok().then(|| path.to_string());
        self.ev(
            pid,
            Some(step),
            EventKind::Exec {
                path: path.into(),
                argv: argv.iter().map(|s| s.to_string()).collect(),
                cwd: WS.into(),
                exe,
                result,
            },
        )
    }

    /// An exec of a `#!` script: the kernel runs `exe` (its interpreter) for `path`.
    pub fn exec_script(
        &mut self,
        pid: i32,
        step: u32,
        path: &str,
        exe: &str,
        argv: &[&str],
    ) -> u64 {
        let argv = argv.iter().map(|s| s.to_string()).collect();
        let kind = EventKind::Exec {
            path: path.into(),
            argv,
            cwd: WS.into(),
            exe: Some(exe.into()),
            result: SysResult::ok(0),
        };
        self.ev(pid, Some(step), kind)
    }

    /// The agent starting step `step` by running the bundled `scripts/{script}` with python3.
    pub fn launch(&mut self, pid: i32, step: u32, script: &str) -> u64 {
        self.step(step, &format!("scripts/{script}"));
        let path = format!("{SKILL}/scripts/{script}");
        self.exec(pid, step, "/usr/bin/python3", &["python3", &path])
    }

    pub fn read(&mut self, pid: i32, step: u32, path: &str) -> u64 {
        self.ev(
            pid,
            Some(step),
            EventKind::Open {
                path: path.into(),
                requested: path.into(),
                flags: vec!["O_RDONLY".into()],
                write: false,
                result: SysResult::ok(3),
            },
        )
    }

    pub fn write(&mut self, pid: i32, step: u32, path: &str) -> u64 {
        self.write_flags(pid, step, path, &["O_WRONLY", "O_CREAT", "O_TRUNC"])
    }

    pub fn write_flags(&mut self, pid: i32, step: u32, path: &str, flags: &[&str]) -> u64 {
        self.ev(
            pid,
            Some(step),
            EventKind::Open {
                path: path.into(),
                requested: path.into(),
                flags: flags.iter().map(|s| s.to_string()).collect(),
                write: true,
                result: SysResult::ok(3),
            },
        )
    }

    pub fn op(&mut self, pid: i32, step: u32, op: FileOp, path: &str, path2: Option<&str>) -> u64 {
        self.ev(
            pid,
            Some(step),
            EventKind::FileOp {
                op,
                path: path.into(),
                path2: path2.map(String::from),
                mode: None,
                result: SysResult::ok(0),
            },
        )
    }

    pub fn dns(&mut self, pid: i32, name: &str, answer: &str) -> u64 {
        let answer = (!answer.is_empty()).then(|| answer.to_string());
        self.ev(
            pid,
            None,
            EventKind::DnsQuery {
                name: name.into(),
                qtype: "A".into(),
                transport: "udp".into(),
                answer,
            },
        )
    }

    pub fn connect(&mut self, pid: i32, step: u32, addr: &str, port: u16) -> u64 {
        self.ev(
            pid,
            Some(step),
            EventKind::Net {
                op: NetOp::Connect,
                family: "inet".into(),
                addr: Some(addr.into()),
                port: Some(port),
                bytes: None,
                local_port: None,
                result: SysResult::ok(0),
            },
        )
    }

    pub fn http(
        &mut self,
        pid: i32,
        step: u32,
        method: &str,
        url: &str,
        host: &str,
        body: u64,
    ) -> u64 {
        self.ev(
            pid,
            Some(step),
            EventKind::HttpRequest {
                method: method.into(),
                url: url.into(),
                host: host.into(),
                headers: vec![],
                body_size: body,
                body_sha256: None,
                body_preview: None,
            },
        )
    }

    pub fn canary(
        &mut self,
        credential: &str,
        host: Option<&str>,
        in_event: u64,
        chain: &[&str],
    ) -> u64 {
        self.ev(
            0,
            None,
            EventKind::CanaryHit {
                canary: format!("{credential}-value"),
                credential: credential.into(),
                chain: chain.iter().map(|s| s.to_string()).collect(),
                in_event,
                host: host.map(String::from),
                service_hosts: vec![],
            },
        )
    }

    pub fn denied(&mut self, pid: i32, syscall: &str, action: &str) -> u64 {
        self.ev(
            pid,
            Some(1),
            EventKind::Denied {
                syscall: syscall.into(),
                nr: 0,
                arch: "x86_64".into(),
                action: action.into(),
            },
        )
    }

    pub fn end(&mut self, complete: bool, reasons: &[&str]) -> u64 {
        self.ev(
            0,
            None,
            EventKind::RunEnd {
                duration_ms: 1234,
                complete,
                incomplete_reasons: reasons.iter().map(|s| s.to_string()).collect(),
            },
        )
    }

    /// A finished trace: closes every open step and adds a complete `run_end`.
    pub fn done(mut self) -> Trace {
        let open: Vec<u32> = self.open_steps();
        for s in open {
            self.step_end(s);
        }
        self.end(true, &[]);
        self.trace()
    }

    pub fn open_steps(&self) -> Vec<u32> {
        let mut open = std::collections::BTreeSet::new();
        for e in &self.events {
            match (&e.kind, e.step) {
                (EventKind::StepStart { .. }, Some(step)) => {
                    open.insert(step);
                }
                (EventKind::StepEnd { .. }, Some(step)) => {
                    open.remove(&step);
                }
                _ => {}
            }
        }
        open.into_iter().collect()
    }

    /// A finished copy; the builder can go on.
    pub fn finished(&self) -> Trace {
        self.clone().done()
    }

    /// The trace as is (no closing events).
    pub fn trace(self) -> Trace {
        Trace {
            header: self.header,
            events: self.events,
        }
    }
}

pub fn judge(t: &Trace, s: &StaticView) -> Report {
    analyse(t, s, None, &AnalyseConfig::shipped())
}

pub fn has(r: &Report, id: &str) -> bool {
    r.indicators.iter().any(|i| i.id == id)
}

pub fn find<'a>(r: &'a Report, id: &str) -> &'a crate::report::Indicator {
    r.indicators
        .iter()
        .find(|i| i.id == id)
        .unwrap_or_else(|| panic!("{id} missing; got {:#?}", r.indicators))
}
