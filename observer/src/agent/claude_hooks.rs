//! Claude Code hooks a skill or plugin bundles (`hooks/hooks.json`, `.claude-plugin/plugin.json`,
//! `.claude/settings*.json`): each `command` runs as Claude Code runs it, with a plausible hook
//! input on standard input.

use super::hooks::{scripts_named, vendored};
use super::{brief, Draft, PlanContext, Source, StepKind};
use crate::bundle::SkillUnit;
use serde_json::{json, Value};

/// At most this many hook commands per manifest.
const MAX_HOOKS_PER_FILE: usize = 32;

/// Files whose `hooks` (or whose whole content) is a Claude Code hook configuration.
fn hook_sources(unit: &SkillUnit) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (path, file) in &unit.files {
        if vendored(path) {
            continue;
        }
        let hooks_json = path == "hooks/hooks.json" || path.ends_with("/hooks/hooks.json");
        let plugin = path.ends_with(".claude-plugin/plugin.json");
        let settings = path.ends_with(".claude/settings.json")
            || path.ends_with(".claude/settings.local.json");
        if !(hooks_json || plugin || settings) {
            continue;
        }
        let Some(v) = file
            .text()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
        else {
            continue;
        };
        match v.get("hooks") {
            Some(Value::Object(_)) => out.push((path.clone(), v["hooks"].clone())),
            // plugin.json may point at hook files: those are read on their own when bundled.
            Some(_) => {}
            None if hooks_json => out.push((path.clone(), v)),
            None => {}
        }
    }
    out
}

/// The tool a `matcher` selects, for the hook's input: its first literal alternative.
fn tool_for(matcher: &str) -> String {
    let first = matcher.split('|').next().unwrap_or("").trim();
    if first.is_empty() || first == "*" || !first.chars().all(|c| c.is_alphanumeric() || c == '_') {
        "Bash".into()
    } else {
        first.to_string()
    }
}

/// A plausible hook input, as Claude Code writes it to the hook's standard input.
pub fn hook_input(event: &str, matcher: &str, session: &str, ctx: &PlanContext) -> Value {
    let tool = tool_for(matcher);
    let project = ctx.workspace.trim_start_matches('/').replace('/', "-");
    let mut v = json!({
        "session_id": session,
        "transcript_path": format!("{}/.claude/projects/-{project}/{session}.jsonl", ctx.home),
        "cwd": ctx.workspace,
        "permission_mode": "default",
        "hook_event_name": event,
    });
    let readme = format!("{}/README.md", ctx.workspace);
    let tool_input = match tool.as_str() {
        "Bash" => json!({"command": "git status", "description": "Show working tree status"}),
        "Write" => {
            json!({"file_path": format!("{}/src/index.js", ctx.workspace), "content": "console.log('hello');\n"})
        }
        "Edit" | "MultiEdit" => {
            json!({"file_path": format!("{}/src/index.js", ctx.workspace), "old_string": "hello", "new_string": "hello world"})
        }
        "Read" => json!({"file_path": readme}),
        "WebFetch" => json!({"url": "https://example.com/", "prompt": "Summarise the page"}),
        "WebSearch" => json!({"query": "release notes"}),
        "Glob" | "Grep" => json!({"pattern": "TODO", "path": ctx.workspace}),
        _ => json!({}),
    };
    let extra = match event {
        "PreToolUse" => json!({"tool_name": tool, "tool_input": tool_input}),
        "PostToolUse" => {
            json!({"tool_name": tool, "tool_input": tool_input, "tool_response": {"success": true}})
        }
        "UserPromptSubmit" => json!({"prompt": "Please review the project and summarise it."}),
        "SessionStart" => json!({"source": "startup"}),
        "SessionEnd" => json!({"reason": "exit"}),
        "Stop" | "SubagentStop" => json!({"stop_hook_active": false}),
        "Notification" => json!({"message": "Claude needs your permission to use Bash"}),
        "PreCompact" => json!({"trigger": "auto", "custom_instructions": ""}),
        _ => json!({}),
    };
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v
}

/// A session id that looks like Claude Code's (a UUID), derived from the skill's digest so the
/// plan stays deterministic.
fn session_id(digest: &str) -> String {
    let h: String = digest
        .chars()
        .filter(char::is_ascii_hexdigit)
        .chain("0".repeat(32).chars())
        .take(32)
        .collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// Every `command` hook, run with `sh -c` in the workspace with the hook input on stdin and
/// `CLAUDE_PROJECT_DIR` / `CLAUDE_PLUGIN_ROOT` set, as Claude Code runs them.
pub fn plugin_hooks(
    unit: &SkillUnit,
    ctx: &PlanContext,
    not_run: &mut Vec<(String, String)>,
) -> Vec<Draft> {
    let session = session_id(&unit.digest);
    let mut out = Vec::new();
    for (path, hooks) in hook_sources(unit) {
        let Some(events) = hooks.as_object() else {
            continue;
        };
        let mut n = 0;
        for (event, groups) in events {
            let groups: Vec<&Value> = match groups {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for g in groups {
                let matcher = g.get("matcher").and_then(Value::as_str).unwrap_or("");
                let list: Vec<&Value> = match g.get("hooks") {
                    Some(Value::Array(a)) => a.iter().collect(),
                    _ => vec![g],
                };
                for h in list {
                    let kind = h.get("type").and_then(Value::as_str).unwrap_or("command");
                    let Some(cmd) = h.get("command").and_then(Value::as_str) else {
                        if kind != "command" {
                            not_run.push((
                                format!("{path} {event} {kind} hook"),
                                "a prompt hook is answered by a model, not run".into(),
                            ));
                        }
                        continue;
                    };
                    n += 1;
                    if n > MAX_HOOKS_PER_FILE {
                        not_run.push((
                            format!("{path} {event}: {}", brief(cmd)),
                            format!("more than {MAX_HOOKS_PER_FILE} hooks in one file"),
                        ));
                        continue;
                    }
                    let input = hook_input(event, matcher, &session, ctx);
                    let mut d = Draft::new(
                        StepKind::PluginHook,
                        format!(
                            "hook {event}{} ({path}): {}",
                            if matcher.is_empty() {
                                String::new()
                            } else {
                                format!("[{matcher}]")
                            },
                            brief(cmd)
                        ),
                        vec!["sh".into(), "-c".into(), cmd.to_string()],
                        &ctx.workspace,
                        Source::file(&path),
                    );
                    d.env_extra = vec![
                        ("CLAUDE_PROJECT_DIR".into(), ctx.workspace.clone()),
                        ("CLAUDE_PLUGIN_ROOT".into(), ctx.skill_dir.clone()),
                    ];
                    d.stdin = Some(format!("{input}\n"));
                    d.scripts = scripts_named(unit, "", cmd);
                    out.push(d);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_input_shapes() {
        let ctx = PlanContext::new("/h/.claude/skills/s", "/h/p/w", "/h", 1000);
        let v = hook_input("PreToolUse", "Write|Edit", "sid", &ctx);
        assert_eq!(v["tool_name"], "Write");
        assert_eq!(v["tool_input"]["file_path"], "/h/p/w/src/index.js");
        assert_eq!(v["cwd"], "/h/p/w");
        assert_eq!(v["transcript_path"], "/h/.claude/projects/-h-p-w/sid.jsonl");
        assert_eq!(
            hook_input("PreToolUse", ".*", "s", &ctx)["tool_name"],
            "Bash"
        );
        assert_eq!(
            hook_input("UserPromptSubmit", "", "s", &ctx)["hook_event_name"],
            "UserPromptSubmit"
        );
        let id = session_id(&"ab".repeat(32));
        assert_eq!(id.len(), 36);
        assert_eq!(session_id("zz").len(), 36);
    }
}
