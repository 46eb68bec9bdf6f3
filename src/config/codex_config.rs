//! `codexConfig:`: what a codex Account's Runs are told in place of the `config.toml` the agent can write: its validation and how `config check` shows it.

use serde::Serialize;

use super::validate::Place;
use crate::error::Error;

/// An Account's `codexConfig`: a mapping of TOML values (no null, which TOML lacks). Which
/// Driver takes it is the Drivers' to say (`commands::capabilities`).
pub(super) fn validate(
    name: &str,
    value: Option<serde_json::Value>,
    place: &Place,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, Error> {
    let Some(value) = value else {
        return Ok(None);
    };
    let key = format!("accounts.{name}.codexConfig");
    let serde_json::Value::Object(map) = value else {
        return Err(place.at(
            &key,
            format!("{key} must be a mapping of Codex's config.toml keys"),
        ));
    };
    if let Some(path) = first_null(&serde_json::Value::Object(map.clone()), String::new()) {
        return Err(place.at(
            &key,
            format!("{key}.{path} is empty (null), which TOML cannot say; give it a value or leave it out"),
        ));
    }
    Ok(Some(map))
}

/// The dotted path of the first null under `v`.
fn first_null(v: &serde_json::Value, at: String) -> Option<String> {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        serde_json::Value::Null => Some(at),
        serde_json::Value::Object(m) => m.iter().find_map(|(k, v)| first_null(v, join(k))),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| first_null(v, join(&i.to_string()))),
        _ => None,
    }
}

/// `codexConfig` as `config check` prints it: a value under a key that may hold a secret
/// (a header, a token, a key) is hidden, as an `env:` value is.
pub(super) fn serialize<S: serde::Serializer>(
    config: &Option<serde_json::Map<String, serde_json::Value>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    // Everything under such a key is hidden: `http_headers: {Authorization: …}`.
    fn hide(key: &str, v: &serde_json::Value, under_secret: bool) -> serde_json::Value {
        let secret = under_secret
            || ["header", "token", "key", "secret", "password"]
                .iter()
                .any(|w| key.to_ascii_lowercase().contains(w));
        match v {
            serde_json::Value::Object(m) => m
                .iter()
                .map(|(k, v)| (k.clone(), hide(k, v, secret)))
                .collect(),
            serde_json::Value::Array(a) => a.iter().map(|v| hide(key, v, secret)).collect(),
            _ if secret => "<hidden>".into(),
            other => other.clone(),
        }
    }
    let shown = config
        .as_ref()
        .map(|m| hide("", &serde_json::Value::Object(m.clone()), false));
    shown.serialize(s)
}
