//! The agent CLIs' settings files a Run can commit to its branch: which paths they are, so that `show` names the ones a Job's branch changed (a Run's CLI never reads them).

/// Files at a worktree's top that a Claude Code, Codex or Gemini CLI started there would
/// read as its settings: hooks, MCP servers, a key helper, an endpoint. A Run's CLI is
/// told to read none of them (each Driver's invocation says how); a branch that changed
/// one is named in `show`, since whoever merges it hands it to their own interactive CLI.
const SETTINGS_FILES: &[&str] = &[
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
];

/// Directories at a worktree's top whose every file is a CLI's configuration (Codex's
/// `config.toml` and hooks, Gemini's `settings.json`, extensions and policies).
const SETTINGS_DIRS: &[&str] = &[".codex/", ".gemini/"];

/// Whether `path` (relative to the worktree, `/`-separated) is an agent CLI's settings.
pub(crate) fn is_settings_file(path: &str) -> bool {
    SETTINGS_FILES.contains(&path) || SETTINGS_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// The words `show` prints for a settings file a Job's branch changed.
pub(crate) fn not_applied(path: &str) -> String {
    format!("the Run changed {path}: not applied")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clis_settings_are_known_and_instruction_files_are_not() {
        for settings in [
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".mcp.json",
            ".codex/config.toml",
            ".gemini/settings.json",
            ".gemini/extensions/x/gemini-extension.json",
        ] {
            assert!(is_settings_file(settings), "{settings}");
        }
        for other in [
            "CLAUDE.md",
            "AGENTS.md",
            "GEMINI.md",
            "src/.claude/settings.json",
            ".claude/agents/reviewer.md",
            ".mcp.json.bak",
        ] {
            assert!(!is_settings_file(other), "{other}");
        }
    }
}
