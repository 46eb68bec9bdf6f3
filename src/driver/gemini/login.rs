//! Which logins the Gemini CLI still serves: a login that bills per token, and the words of one its vendor retired (`IneligibleTierError`, recorded from 0.61.0).

use crate::config::Account;

/// Since 2026-06-18 Google serves the Gemini CLI to API keys and Gemini Code Assist
/// Standard and Enterprise licences only; the personal tiers moved to the Antigravity CLI.
pub(super) const LOGINS_SERVED: &str = "the Gemini CLI serves API keys (billed per token) and \
     Gemini Code Assist Standard or Enterprise licences; since 2026-06-18 it no longer serves \
     Google AI Pro, Ultra, Google One or free Google logins, whose successor is the \
     Antigravity CLI";

/// The login choices of `security.auth.selectedType` that bill per token.
const BILLED_CHOICES: [&str; 2] = ["gemini-api-key", "vertex-ai"];

/// The Account's login that bills per token, in words: a key in its `env`, or a store whose
/// settings chose a key or Vertex AI.
pub(super) fn billed_login(account: &Account) -> Option<String> {
    if let Some(key) = super::INHERITED_CREDENTIALS
        .iter()
        .find(|k| account.env.contains_key(**k))
    {
        return Some(format!("an API key ({key} in its env)"));
    }
    let choice = super::home::stored_login_choice(account)?;
    BILLED_CHOICES
        .contains(&choice.as_str())
        .then(|| format!("{choice} (its credential store's settings.json)"))
}

/// The sign the CLI leaves on stderr when its vendor refuses the login's tier before the
/// first turn: no result line, exit 1, `…IneligibleTierError: <the server's reason>`
/// (tests/fixtures/gemini-cli-0.61.0/ineligible-tier.stderr.txt).
const INELIGIBLE: &str = "IneligibleTierError: ";

/// The lost login's reason when the CLI's stderr shows a retired tier.
pub(super) fn login_refused(stderr_tail: &str) -> Option<String> {
    let at = stderr_tail.rfind(INELIGIBLE)? + INELIGIBLE.len();
    let said = stderr_tail[at..].lines().next().unwrap_or("").trim();
    let said = crate::text::truncate(said, 300);
    Some(format!(
        "Google refused this login's tier (IneligibleTierError: {said}); {LOGINS_SERVED}: log \
         in with an API key and allowBilledUsage, or a Code Assist licence"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_refusal_is_a_lost_login_in_words() {
        let stderr = crate::driver::fixture_text("gemini-cli-0.61.0", "ineligible-tier.stderr.txt");
        let why = login_refused(&stderr).expect("the recorded refusal is read");
        assert!(
            why.contains("IneligibleTierError: This account is no longer eligible"),
            "{why}"
        );
        assert!(why.contains("Antigravity CLI"), "{why}");
        assert!(!why.contains("at throwIneligible"), "{why}");
        assert_eq!(login_refused("Error: something else\n"), None);
    }

    #[test]
    fn a_key_in_the_env_or_a_billed_choice_in_the_store_bills_per_token() {
        let mut account = Account::plain();
        let dir = tempfile::tempdir().unwrap();
        account.credential_store = Some(dir.path().to_path_buf());
        assert_eq!(billed_login(&account), None);
        std::fs::create_dir_all(dir.path().join(".gemini")).unwrap();
        let settings = dir.path().join(".gemini/settings.json");
        std::fs::write(
            &settings,
            r#"{"security":{"auth":{"selectedType":"oauth-personal"}}}"#,
        )
        .unwrap();
        assert_eq!(billed_login(&account), None);
        std::fs::write(
            &settings,
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .unwrap();
        assert!(billed_login(&account)
            .unwrap()
            .starts_with("gemini-api-key"));
        let mut env = std::collections::BTreeMap::new();
        env.insert("GEMINI_API_KEY".to_string(), "AIza-test".to_string());
        account.env = crate::config::Env(env);
        assert_eq!(
            billed_login(&account).as_deref(),
            Some("an API key (GEMINI_API_KEY in its env)")
        );
    }
}
