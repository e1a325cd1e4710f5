//! The agent's plan in the report: what was planned (recorded in the trace header, so a replay
//! shows the same plan), what ran with which exit status, coverage, and the prose gates the plan
//! ran past.

use crate::trace::{Event, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The plan as `observe` records it in the trace header.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    pub steps: Vec<PlanStepRecord>,
    /// Steps found beyond the step limit (not run; they count against coverage).
    #[serde(default)]
    pub over_limit: usize,
    /// Bundled scripts the plan can run.
    #[serde(default)]
    pub scripts: Vec<String>,
    #[serde(default)]
    pub ignored_gates: Vec<GateRecord>,
    #[serde(default)]
    pub not_run: Vec<NotRun>,
    /// Days the dated pass moved the clock, if there was one.
    #[serde(default)]
    pub dated_pass_days: Option<i64>,
    /// `--clock-offset` of the whole run, in seconds.
    #[serde(default)]
    pub clock_offset_s: i64,
    /// Set when an external agent (`--agent CMD`) ran instead of the built-in planner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRecord>,
}

/// The external agent of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent's command line, task last.
    pub argv: Vec<String>,
    pub task: String,
    /// `--passthrough` rules (`HOST[:PORT]`, `*.SUFFIX`) forwarding the agent's model API
    /// upstream; its own traffic they let through is not counted against the skill.
    pub passthrough: Vec<String>,
}

/// What the external agent did: its own process, and the commands it ran (each a process tree
/// of its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    pub argv: Vec<String>,
    pub task: String,
    pub passthrough: Vec<String>,
    /// The agent's own process (host pid), when it started.
    pub pid: Option<i32>,
    pub commands: Vec<AgentCommand>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentCommand {
    /// The exec event.
    pub seq: u64,
    pub pid: i32,
    pub argv: Vec<String>,
    pub ok: bool,
}

/// The agent's process is the first program its step executes. Its forks that have not executed
/// anything yet are still the agent (a subshell, a worker); a program one of those executes is a
/// command (a tool call: `bash -c …`, `python3 script.py`), and what a command runs in turn
/// belongs to that command.
pub fn agent_report(rec: &AgentRecord, step: u32, events: &[&Event]) -> AgentReport {
    let mut pid = None;
    let mut commands = Vec::new();
    let mut agent: std::collections::BTreeSet<i32> = std::collections::BTreeSet::new();
    for e in events.iter().filter(|e| e.step == Some(step)) {
        match &e.kind {
            EventKind::Spawn {
                parent,
                child,
                thread: false,
            } if agent.contains(parent) => {
                agent.insert(*child);
            }
            EventKind::Exec { argv, result, .. } => match pid {
                None => {
                    pid = Some(e.pid);
                    agent.insert(e.pid);
                }
                Some(root) if e.pid != root && agent.contains(&e.pid) => {
                    if result.is_ok() {
                        agent.remove(&e.pid);
                    }
                    commands.push(AgentCommand {
                        seq: e.seq,
                        pid: e.pid,
                        argv: argv.clone(),
                        ok: result.is_ok(),
                    });
                }
                _ => {}
            },
            _ => {}
        }
    }
    AgentReport {
        argv: rec.argv.clone(),
        task: rec.task.clone(),
        passthrough: rec.passthrough.clone(),
        pid,
        commands,
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanStepRecord {
    pub id: u32,
    pub kind: String,
    pub label: String,
    pub argv: Vec<String>,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scripts: Vec<String>,
    /// Part of the dated pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dated: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    pub text: String,
    pub source: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NotRun {
    pub what: String,
    pub why: String,
}

/// One planned step and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    #[serde(flatten)]
    pub step: PlanStepRecord,
    pub ran: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub steps_run: usize,
    pub steps_found: usize,
    pub scripts_executed: usize,
    pub scripts_bundled: usize,
    pub complete: bool,
}

/// The report's `plan` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub steps: Vec<StepOutcome>,
    pub coverage: Coverage,
    pub ignored_gates: Vec<GateRecord>,
    pub not_run: Vec<NotRun>,
    pub dated_pass_days: Option<i64>,
    pub clock_offset_s: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentReport>,
}

impl PlanReport {
    /// Why the plan did not run whole (empty when it did).
    pub fn incomplete_reason(&self) -> Option<String> {
        let c = &self.coverage;
        (!c.complete).then(|| {
            format!(
                "coverage: {} of {} planned steps ran, {} of {} bundled scripts executed",
                c.steps_run, c.steps_found, c.scripts_executed, c.scripts_bundled
            )
        })
    }
}

/// Joins the recorded plan with the steps the trace shows.
pub fn plan_report(rec: &PlanRecord, events: &[&Event]) -> PlanReport {
    #[derive(Default)]
    struct Seen {
        started: bool,
        end: Option<(Option<i32>, Option<i32>, bool)>,
    }
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    for e in events {
        let Some(step) = e.step else { continue };
        match &e.kind {
            EventKind::StepStart { .. } => seen.entry(step).or_default().started = true,
            EventKind::StepEnd {
                exit_code,
                signal,
                timed_out,
            } => seen.entry(step).or_default().end = Some((*exit_code, *signal, *timed_out)),
            _ => {}
        }
    }
    let steps: Vec<StepOutcome> = rec
        .steps
        .iter()
        .map(|s| {
            let v = seen.get(&s.id);
            let (exit_code, signal, timed_out) =
                v.and_then(|v| v.end).unwrap_or((None, None, false));
            StepOutcome {
                step: s.clone(),
                ran: v.is_some_and(|v| v.started),
                exit_code,
                signal,
                timed_out,
            }
        })
        .collect();
    let steps_run = steps.iter().filter(|s| s.ran).count();
    let mut executed: Vec<&str> = steps
        .iter()
        .filter(|s| s.ran)
        .flat_map(|s| s.step.scripts.iter().map(String::as_str))
        .filter(|p| rec.scripts.iter().any(|s| s == p))
        .collect();
    executed.sort_unstable();
    executed.dedup();
    let steps_found = rec.steps.len() + rec.over_limit;
    let coverage = Coverage {
        steps_run,
        steps_found,
        scripts_executed: executed.len(),
        scripts_bundled: rec.scripts.len(),
        complete: steps_run >= steps_found && executed.len() >= rec.scripts.len(),
    };
    PlanReport {
        steps,
        coverage,
        ignored_gates: rec.ignored_gates.clone(),
        not_run: rec.not_run.clone(),
        dated_pass_days: rec.dated_pass_days,
        clock_offset_s: rec.clock_offset_s,
        agent: rec
            .agent
            .as_ref()
            .and_then(|a| rec.steps.first().map(|s| agent_report(a, s.id, events))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, step: u32, kind: EventKind) -> Event {
        Event {
            seq,
            t_ns: seq,
            pid: 1,
            tid: None,
            ppid: None,
            vpid: Some(1),
            step: Some(step),
            kind,
        }
    }

    fn rec() -> PlanRecord {
        let step = |id: u32, script: &str| PlanStepRecord {
            id,
            kind: "orphan_script".into(),
            label: format!("run {script}"),
            argv: vec!["bash".into(), script.into()],
            source: script.into(),
            scripts: vec![script.into()],
            ..Default::default()
        };
        PlanRecord {
            steps: vec![step(0, "a.sh"), step(1, "b.sh")],
            scripts: vec!["a.sh".into(), "b.sh".into()],
            ignored_gates: vec![GateRecord {
                text: "only when the user says deploy".into(),
                source: "SKILL.md:4".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_step_that_never_started_makes_coverage_incomplete() {
        let events = [
            ev(
                0,
                0,
                EventKind::StepStart {
                    label: "run a.sh".into(),
                    argv: vec![],
                },
            ),
            ev(
                1,
                0,
                EventKind::StepEnd {
                    exit_code: Some(3),
                    signal: None,
                    timed_out: false,
                },
            ),
        ];
        let r = plan_report(&rec(), &events.iter().collect::<Vec<_>>());
        assert!(r.steps[0].ran);
        assert_eq!(r.steps[0].exit_code, Some(3));
        assert!(!r.steps[1].ran);
        assert_eq!(r.coverage.steps_run, 1);
        assert_eq!(r.coverage.scripts_executed, 1);
        assert!(!r.coverage.complete);
        let why = r.incomplete_reason().expect("incomplete");
        assert!(why.contains("1 of 2 planned steps"), "{why}");
        assert_eq!(r.ignored_gates.len(), 1);
    }

    #[test]
    fn steps_over_the_limit_count_as_not_run() {
        let mut p = rec();
        p.over_limit = 3;
        let events: Vec<Event> = (0..2)
            .map(|i| {
                ev(
                    i as u64,
                    i,
                    EventKind::StepStart {
                        label: String::new(),
                        argv: vec![],
                    },
                )
            })
            .collect();
        let refs: Vec<&Event> = events.iter().collect();
        let r = plan_report(&p, &refs);
        assert_eq!(r.coverage.steps_found, 5);
        assert!(!r.coverage.complete);
        p.over_limit = 0;
        assert!(plan_report(&p, &refs).coverage.complete);
    }

    #[test]
    fn agent_commands_are_the_programs_its_own_forks_execute() {
        let e = |seq: u64, pid: i32, ppid: i32, kind: EventKind| Event {
            seq,
            t_ns: seq,
            pid,
            tid: None,
            ppid: Some(ppid),
            vpid: None,
            step: Some(0),
            kind,
        };
        let exec = |argv: &[&str]| EventKind::Exec {
            path: String::new(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: String::new(),
            exe: None,
            result: crate::trace::SysResult::ok(0),
        };
        let spawn = |parent: i32, child: i32| EventKind::Spawn {
            parent,
            child,
            thread: false,
        };
        let events = [
            e(1, 10, 1, exec(&["agent", "task"])),
            // A subshell of the agent runs a tool call.
            e(2, 11, 10, spawn(10, 11)),
            e(3, 11, 10, exec(&["sh", "-c", "bash scripts/x.sh"])),
            // What the tool call runs belongs to it, not to the agent.
            e(4, 12, 11, spawn(11, 12)),
            e(5, 12, 11, exec(&["bash", "scripts/x.sh"])),
            // A second direct tool call.
            e(6, 13, 10, spawn(10, 13)),
            e(7, 13, 10, exec(&["python3", "y.py"])),
        ];
        let refs: Vec<&Event> = events.iter().collect();
        let a = agent_report(&AgentRecord::default(), 0, &refs);
        assert_eq!(a.pid, Some(10));
        let argv0: Vec<&str> = a.commands.iter().map(|c| c.argv[0].as_str()).collect();
        assert_eq!(argv0, vec!["sh", "python3"]);
    }
}
