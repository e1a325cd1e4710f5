//! Steps that run one bundled script: the argv for an interpreter and arguments, and the
//! steps of a script the instructions reference.

use super::MAX_INVOCATIONS_PER_SCRIPT;
use super::{brief, commands, instructions, scripts, Draft, PlanContext, Source, StepKind};
use crate::bundle::{Script, SkillUnit};

/// Interpreter, arguments and shell-expanded argument text of one invocation.
type InvocationKey = (Option<Vec<String>>, Vec<String>, Option<String>);

/// A step running one script: `head` (interpreter and options; empty for a direct exec), the
/// installed path, then `args`.
pub(crate) fn script_step(
    kind: StepKind,
    s: &Script,
    head: &[String],
    args: &[String],
    shell_args: Option<&str>,
    ctx: &PlanContext,
) -> Draft {
    let abs = format!("{}/{}", ctx.skill_dir, s.path);
    let argv: Vec<String> = match shell_args {
        // Arguments a shell must expand: run the whole line through bash.
        Some(raw) => {
            let mut line: Vec<String> = head.iter().map(|h| commands::sh_quote(h)).collect();
            line.push(commands::sh_quote(&abs));
            let mut l = line.join(" ");
            l.push(' ');
            l.push_str(raw);
            vec!["bash".into(), "-c".into(), l]
        }
        None => head
            .iter()
            .cloned()
            .chain(std::iter::once(abs))
            .chain(args.iter().cloned())
            .collect(),
    };
    let how = head.first().map_or("exec".to_string(), |h| h.clone());
    let what = match kind {
        StepKind::OrphanScript => "orphan script",
        _ => "script",
    };
    let mut label = format!("{what} {} ({how})", s.path);
    if !args.is_empty() || shell_args.is_some() {
        label = format!(
            "{label} {}",
            brief(&shell_args.map_or_else(|| args.join(" "), str::to_string))
        );
    }
    let mut d = Draft::new(kind, label, argv, &ctx.workspace, Source::file(&s.path));
    d.scripts = vec![s.path.clone()];
    d
}

/// Steps for one referenced script: each distinct invocation shown (at most
/// [`MAX_INVOCATIONS_PER_SCRIPT`]), a plausible invocation when no arguments were shown, and any
/// other interpreter the script could be meant for.
pub(crate) fn referenced(
    s: &Script,
    invs: &[&instructions::Invocation],
    unit: &SkillUnit,
    ctx: &PlanContext,
    res: &commands::Resolver,
    used: &mut Vec<(String, Vec<String>)>,
) -> Vec<Draft> {
    let heads = scripts::heads(s, unit);
    let direct_ok = s.executable
        && (s.by_shebang.is_some()
            || unit
                .files
                .get(&s.path)
                .is_some_and(|f| f.bytes.starts_with(b"\x7fELF")));
    let mut out = Vec::new();
    let mut seen: Vec<InvocationKey> = Vec::new();
    let gate = invs.iter().find_map(|i| i.gate.clone());
    let mut any_args = false;
    let mut first_args: (Vec<String>, Option<String>) = (Vec::new(), None);
    for inv in invs.iter().filter(|i| i.runs) {
        let Some(shown) = &inv.shown else { continue };
        let args: Vec<String> = shown.args.iter().map(|a| res.shell(a)).collect();
        let shell_args = shown.shell_args.as_ref().map(|a| res.shell(a));
        let key = (shown.interp.clone(), args.clone(), shell_args.clone());
        if seen.contains(&key) || seen.len() >= MAX_INVOCATIONS_PER_SCRIPT {
            continue;
        }
        seen.push(key);
        if !args.is_empty() || shell_args.is_some() {
            if !any_args {
                first_args = (args.clone(), shell_args.clone());
            }
            any_args = true;
        }
        let run_heads: Vec<Vec<String>> = match &shown.interp {
            Some(i) => vec![i.clone()],
            None if direct_ok => vec![Vec::new()],
            None => heads.clone(),
        };
        for h in run_heads {
            let used_as = if h.is_empty() {
                s.by_shebang
                    .as_ref()
                    .map(|i| vec![i.program.clone()])
                    .unwrap_or_default()
            } else {
                h.clone()
            };
            used.push((s.path.clone(), used_as));
            if inv.covered && (shown.interp.is_some() || direct_ok) {
                continue; // the command step is exactly this invocation and it works
            }
            let mut d = script_step(
                StepKind::ReferencedScript,
                s,
                &h,
                &args,
                shell_args.as_deref(),
                ctx,
            );
            d.source = inv.source.clone();
            d.gate = inv.gate.clone().or_else(|| gate.clone());
            out.push(d);
        }
    }
    let source = invs
        .first()
        .map(|i| i.source.clone())
        .unwrap_or_else(|| Source::file(&s.path));
    let shown_plain = !seen.is_empty();
    if !any_args {
        // Plausible invocation: a sample input when the script reads its arguments (an
        // argument-free call already shown needs no repeat).
        let text = unit.files.get(&s.path).and_then(|f| f.text()).unwrap_or("");
        let args: Vec<String> = if scripts::reads_argv(text) {
            vec![res.sample_for(text)]
        } else {
            Vec::new()
        };
        first_args = (args.clone(), None);
        let plain: Vec<Vec<String>> = if shown_plain && args.is_empty() {
            Vec::new()
        } else if direct_ok {
            vec![Vec::new()]
        } else {
            heads.clone()
        };
        for h in &plain {
            let mut d = script_step(StepKind::ReferencedScript, s, h, &args, None, ctx);
            d.source = source.clone();
            d.gate = gate.clone();
            let used_as = match (h.is_empty(), &s.by_shebang) {
                (true, Some(i)) => vec![i.program.clone()],
                _ => h.clone(),
            };
            used.push((s.path.clone(), used_as));
            out.push(d);
        }
    }
    // Interpreters the script could also be meant for (a decoy shebang or extension).
    for h in &heads {
        let prog = |v: &[String]| {
            v.first()
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
        };
        if used.iter().any(|(p, u)| p == &s.path && prog(u) == prog(h)) {
            continue;
        }
        let mut d = script_step(
            StepKind::ReferencedScript,
            s,
            h,
            &first_args.0,
            first_args.1.as_deref(),
            ctx,
        );
        d.label = format!("{} [other interpreter]", d.label);
        d.source = source.clone();
        d.gate = gate.clone();
        used.push((s.path.clone(), h.clone()));
        out.push(d);
    }
    out
}
