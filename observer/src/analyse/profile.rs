//! The behavioural profile of a run, assembled from observations (sorted, capped, deterministic).

use super::net::{declared, hosts_by_key};
use super::observe::Observations;
use super::AnalyseConfig;
use crate::model::StaticView;
use crate::report::{
    CanaryHitInfo, CredentialUse, DenialInfo, FileAccess, FileInfo, HostInfo, NoteInfo, PathClass,
    ProcessInfo, Profile, ProgramInfo, StepInfo,
};
use crate::trace::{Event, EventKind};
use std::collections::{BTreeMap, BTreeSet};

pub fn cap(mut v: Vec<u64>, cfg: &AnalyseConfig) -> Vec<u64> {
    v.sort_unstable();
    v.dedup();
    v.truncate(cfg.thresholds.evidence_cap);
    v
}

pub fn build(
    o: &Observations,
    events: &[&Event],
    statics: &StaticView,
    cfg: &AnalyseConfig,
) -> Profile {
    let mut p = Profile::default();
    let mut steps: BTreeMap<u32, StepInfo> = BTreeMap::new();
    let mut procs: BTreeMap<i32, ProcessInfo> = BTreeMap::new();
    for ev in events {
        if ev.pid > 0 {
            let step = ev.step.or_else(|| o.pid_step.get(&ev.pid).copied());
            procs.entry(ev.pid).or_insert_with(|| ProcessInfo {
                pid: ev.pid,
                parent: o.parent.get(&ev.pid).copied(),
                step,
                first_seq: ev.seq,
                program: None,
                argv: vec![],
                exit_code: None,
                signal: None,
            });
        }
        match &ev.kind {
            EventKind::StepStart { label, argv } => {
                let Some(step) = ev.step else { continue };
                steps.entry(step).or_insert(StepInfo {
                    step,
                    label: label.clone(),
                    argv: argv.clone(),
                    start_seq: ev.seq,
                    end_seq: None,
                    exit_code: None,
                    signal: None,
                    timed_out: false,
                });
            }
            EventKind::StepEnd {
                exit_code,
                signal,
                timed_out,
            } => {
                if let Some(s) = ev.step.and_then(|step| steps.get_mut(&step)) {
                    s.end_seq = Some(ev.seq);
                    s.exit_code = *exit_code;
                    s.signal = *signal;
                    s.timed_out = *timed_out;
                }
            }
            EventKind::Spawn {
                parent,
                child,
                thread: false,
            } => {
                procs.entry(*child).or_insert_with(|| ProcessInfo {
                    pid: *child,
                    parent: Some(*parent),
                    step: ev.step.or_else(|| o.pid_step.get(child).copied()),
                    first_seq: ev.seq,
                    program: None,
                    argv: vec![],
                    exit_code: None,
                    signal: None,
                });
            }
            EventKind::Exit { code, signal } => {
                if let Some(pr) = procs.get_mut(&ev.pid) {
                    pr.exit_code = *code;
                    pr.signal = *signal;
                }
            }
            EventKind::Denied {
                syscall,
                nr: _,
                arch,
                action,
            } => p.denials.push(DenialInfo {
                seq: ev.seq,
                pid: ev.pid,
                syscall: syscall.clone(),
                arch: arch.clone(),
                action: action.clone(),
            }),
            EventKind::TracerNote { note, detail } => p.notes.push(NoteInfo {
                seq: ev.seq,
                kind: "tracer_note".into(),
                note: note.clone(),
                detail: detail.clone(),
            }),
            EventKind::Limit { what, detail } => p.notes.push(NoteInfo {
                seq: ev.seq,
                kind: "limit".into(),
                note: what.clone(),
                detail: detail.clone(),
            }),
            _ => {}
        }
    }
    for e in o.execs.iter().filter(|e| e.ok) {
        if let Some(pr) = procs.get_mut(&e.pid) {
            pr.program = Some(e.program.clone());
            pr.argv = e.argv.clone();
        }
    }
    p.steps = steps.into_values().collect();
    p.processes = procs.into_values().collect();
    p.processes.sort_by_key(|x| (x.first_seq, x.pid));

    p.programs = o
        .execs
        .iter()
        .filter(|e| e.err.as_deref() != Some("ENOENT"))
        .map(|e| ProgramInfo {
            seq: e.seq,
            pid: e.pid,
            step: e.step,
            program: e.program.clone(),
            program_key: String::new(),
            argv: e.argv.clone(),
            ok: e.ok,
            execution: e.execution && e.ok,
        })
        .collect();

    for (key, a) in hosts_by_key(o, cfg) {
        let (addrs, urls, via) = (a.addrs, a.urls, a.via);
        p.hosts.push(HostInfo {
            declared: declared(&key, statics),
            host: key,
            addrs: addrs.into_iter().collect(),
            ports: a.ports.iter().copied().collect(),
            urls: urls.into_iter().take(cfg.thresholds.evidence_cap).collect(),
            via: via.into_iter().map(String::from).collect(),
            sent_data: a.data,
            evidence: cap(a.seqs, cfg),
        });
    }

    let mut files: BTreeMap<String, (PathClass, BTreeSet<FileAccess>, bool, Vec<u64>)> =
        BTreeMap::new();
    for f in &o.files {
        let quiet = matches!(
            f.class,
            PathClass::System | PathClass::Pseudo | PathClass::SkillOwn | PathClass::Cache
        );
        if f.access == FileAccess::Read && quiet {
            continue;
        }
        let e = files
            .entry(f.path.clone())
            .or_insert((f.class, BTreeSet::new(), false, vec![]));
        e.1.insert(f.access);
        e.2 |= f.failed;
        e.3.push(f.seq);
    }
    p.files = files
        .into_iter()
        .map(|(path, (class, access, failed, seqs))| FileInfo {
            path,
            class,
            access: access.into_iter().collect(),
            failed,
            evidence: cap(seqs, cfg),
        })
        .collect();

    let mut creds: BTreeMap<(String, String, bool), Vec<u64>> = BTreeMap::new();
    for c in &o.creds {
        creds
            .entry((c.credential.clone(), c.via.clone(), c.ambient))
            .or_default()
            .push(c.seq);
    }
    p.credentials = creds
        .into_iter()
        .map(|((credential, via, ambient), s)| CredentialUse {
            credential,
            via,
            ambient,
            evidence: cap(s, cfg),
        })
        .collect();

    p.canary_hits = o
        .canaries
        .iter()
        .map(|c| CanaryHitInfo {
            seq: c.seq,
            canary: c.canary.clone(),
            credential: c.credential.clone(),
            chain: c.chain.clone(),
            in_event: c.in_event,
            host: c.host.as_ref().map(|h| h.name.clone()),
            service_hosts: c.service_hosts.clone(),
            own_service: c.own_service,
        })
        .collect();
    p
}
