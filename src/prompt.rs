//! What owl tells the agent: the standing instructions (one place, pinned by a test) and each Run's prompt.

use crate::handoff::HANDOFF_PATH;

/// owl's standing instructions, appended to the agent's system prompt on every Run.
pub const STANDING_INSTRUCTIONS: &str = "\
You are running unattended under owl: nobody is watching and nobody will answer a question \
until morning. Work on the current git branch in this worktree only.
- Work in small commits on this branch as you go (git add, git commit), so that a Run cut \
short loses only its uncommitted tail.
- Never push, never switch branches, and never touch any other branch or checkout.
- Before you stop, write .owl/handoff.md and commit it. Its first line is exactly one of \
`status: done`, `status: continue` or `status: blocked`. After it: what was done, what is \
next, and what a fresh context must know to carry on. A later Run starts from this file \
alone, not from this conversation.
- Use `status: blocked` only for what you cannot resolve yourself (a missing credential, a \
decision only a person can make), and say exactly what is needed.";

/// The user message that starts a Run: the Job's prompt, then the Handoff a previous Run
/// left, if any.
pub fn build(job_prompt: &str, handoff: Option<&str>) -> String {
    let mut prompt = job_prompt.trim_end().to_string();
    if let Some(h) = handoff {
        prompt.push_str(&format!(
            "\n\n---\nA previous Run of this Job left this Handoff in {HANDOFF_PATH}:\n\n{}\n",
            h.trim_end()
        ));
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_instructions_wording_is_pinned() {
        // Changing what every unattended Run is told is a deliberate act: update this test too.
        assert!(STANDING_INSTRUCTIONS.contains("small commits on this branch"));
        assert!(STANDING_INSTRUCTIONS.contains("Never push"));
        assert!(STANDING_INSTRUCTIONS.contains(".owl/handoff.md"));
        assert!(STANDING_INSTRUCTIONS
            .contains("`status: done`, `status: continue` or `status: blocked`"));
        assert_eq!(STANDING_INSTRUCTIONS.len(), 830);
    }

    #[test]
    fn the_prompt_carries_the_handoff() {
        assert_eq!(build("Fix it.\n", None), "Fix it.");
        let p = build("Fix it.", Some("status: continue\nnext: tests"));
        assert!(p.starts_with("Fix it.\n\n---\nA previous Run"));
        assert!(p.contains("next: tests"));
    }
}
