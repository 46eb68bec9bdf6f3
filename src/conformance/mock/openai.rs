//! A loopback mock of the OpenAI Responses API and ChatGPT's usage endpoint for driving the real Codex CLI: std only, 127.0.0.1; `POST /v1/responses` answered as SSE from a script of steps (the last repeats), `GET /backend-api/wham/usage` with the plan's figures. Ported from the recording's `mock_openai_responses.py`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::http as mock_http;

/// One scripted answer to one `POST /v1/responses`.
#[derive(Debug, Clone)]
pub enum Step {
    Text(String),
    /// A shell command through the `exec_command` tool.
    Shell(String),
    /// A 429 `usage_limit_reached` that resets `secs` from now.
    UsageLimit {
        secs: i64,
    },
    /// The same 429 with the reset only in its `x-codex-*` headers: the CLI's words name no
    /// time ("… or try again later."), its rollout does.
    #[cfg(any(test, feature = "test-doubles"))]
    UsageLimitUnnamed {
        secs: i64,
    },
    /// No answer: the response is held open, as by a model that thinks for a long time.
    #[cfg(any(test, feature = "test-doubles"))]
    Hold,
    /// The step, its response carrying the plan's utilization in the `x-codex-*` headers
    /// (percent of the five-hour and weekly windows); `/wham/usage` tells these figures
    /// from then on.
    AtUsage {
        primary: f64,
        secondary: f64,
        step: Box<Step>,
    },
}

impl Step {
    /// This step at these figures of the plan.
    pub fn at(self, primary: f64, secondary: f64) -> Step {
        Step::AtUsage {
            primary,
            secondary,
            step: Box::new(self),
        }
    }
}

/// The plan's utilization as the mock backend knows it.
#[derive(Debug, Clone, Copy)]
struct Plan {
    primary: f64,
    secondary: f64,
    /// Epoch seconds.
    primary_reset: i64,
    secondary_reset: i64,
}

/// The running mock; it serves until the process ends.
pub struct MockOpenAi {
    pub port: u16,
    script: mock_http::Script<Step>,
    pub requests: Arc<Mutex<Vec<Value>>>,
    #[cfg(any(test, feature = "test-doubles"))]
    plan: Arc<Mutex<Plan>>,
}

impl MockOpenAi {
    pub fn start() -> std::io::Result<MockOpenAi> {
        let script = mock_http::Script::new();
        let now = chrono::Utc::now().timestamp();
        // The recording mock's defaults: 42% of five hours, 13% of the week.
        let plan = Arc::new(Mutex::new(Plan {
            primary: 42.0,
            secondary: 13.0,
            primary_reset: now + 3600,
            secondary_reset: now + 259_200,
        }));
        let (serving, plan_now) = (script.clone(), plan.clone());
        let port = mock_http::serve(false, move |req| answer(req, &serving, &plan_now))?;
        Ok(MockOpenAi {
            port,
            requests: script.requests.clone(),
            script,
            #[cfg(any(test, feature = "test-doubles"))]
            plan,
        })
    }

    /// How many `POST /responses` came: model turns, which a probe must not cause.
    pub fn calls(&self) -> usize {
        self.script.calls()
    }

    /// When the five-hour window resets, in epoch seconds.
    #[cfg(any(test, feature = "test-doubles"))]
    pub fn primary_reset(&self) -> i64 {
        self.plan
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .primary_reset
    }

    /// A throwaway `CODEX_HOME` at this mock: `config.toml`, and with `chatgpt` a fake
    /// ChatGPT login (`auth.json` with unsigned tokens, PROTOCOL.md §2); else the API key
    /// is read from `key_var`. Retries are off, so an error ends the turn at once.
    pub fn write_codex_home(
        &self,
        home: &Path,
        chatgpt: bool,
        key_var: &str,
    ) -> std::io::Result<()> {
        std::fs::create_dir_all(home)?;
        let auth = if chatgpt {
            "requires_openai_auth = true\n".to_string()
        } else {
            format!("env_key = \"{key_var}\"\n")
        };
        let top = if chatgpt {
            format!(
                "chatgpt_base_url = \"http://127.0.0.1:{}/backend-api/\"\n",
                self.port
            )
        } else {
            String::new()
        };
        std::fs::write(
            home.join("config.toml"),
            format!(
                "model = \"mock-model\"\nmodel_provider = \"mock\"\ncli_auth_credentials_store = \"file\"\n{top}\n\
                 [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n{auth}\
                 request_max_retries = 0\nstream_max_retries = 0\n",
                self.base_url()
            ),
        )?;
        if chatgpt {
            std::fs::write(home.join("auth.json"), fake_chatgpt_auth().to_string())?;
        }
        Ok(())
    }

    /// What an Account's `codexConfig` says for Runs at this mock (the same as the
    /// `config.toml` [`MockOpenAi::write_codex_home`] writes): its provider, and with
    /// `chatgpt` the ChatGPT base URL; else the API key is read from `key_var`.
    pub fn codex_config(&self, chatgpt: bool, key_var: &str) -> serde_json::Value {
        let mut provider = serde_json::json!({
            "name": "mock",
            "base_url": self.base_url(),
            "wire_api": "responses",
            "request_max_retries": 0,
            "stream_max_retries": 0,
        });
        let mut config = serde_json::json!({
            "model": "mock-model",
            "model_provider": "mock",
            "cli_auth_credentials_store": "file",
        });
        if chatgpt {
            provider["requires_openai_auth"] = true.into();
            config["chatgpt_base_url"] =
                format!("http://127.0.0.1:{}/backend-api/", self.port).into();
        } else {
            provider["env_key"] = key_var.into();
        }
        config["model_providers"] = serde_json::json!({ "mock": provider });
        config
    }

    /// The steps for the next calls, in order; the last one repeats.
    pub fn script(&self, steps: Vec<Step>) {
        self.script.set(steps);
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// A ChatGPT login as Codex keeps it, with unsigned tokens that expire in 30 days
/// (`fake_chatgpt_auth()` of the recording's tools).
fn fake_chatgpt_auth() -> Value {
    let now = chrono::Utc::now();
    let claims = json!({
        "exp": now.timestamp() + 30 * 86_400,
        "iat": now.timestamp(),
        "email": "owl-fake@example.com",
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "plus",
            "chatgpt_account_id": "acct-FAKE-0001",
            "chatgpt_user_id": "user-FAKE-0001"
        }
    });
    let jwt = format!(
        "{}.{}.FAKESIG",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(claims.to_string().as_bytes())
    );
    json!({
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": null,
        "tokens": {"id_token": jwt, "access_token": jwt, "refresh_token": "rt-FAKE-owl", "account_id": "acct-FAKE-0001"},
        "last_refresh": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

/// Base64url without padding, as a JWT's parts are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// `/wham/usage` as the ChatGPT backend answers it: whole percents, windows in seconds.
fn usage_body(plan: &Plan) -> Value {
    let now = chrono::Utc::now().timestamp();
    let window = |percent: f64, seconds: i64, reset: i64| {
        json!({"used_percent": percent.round() as i64, "limit_window_seconds": seconds,
               "reset_after_seconds": (reset - now).max(0), "reset_at": reset})
    };
    json!({"plan_type": "plus", "rate_limit": {"allowed": true, "limit_reached": false,
        "primary_window": window(plan.primary, 18_000, plan.primary_reset),
        "secondary_window": window(plan.secondary, 604_800, plan.secondary_reset)},
        "credits": null})
}

fn answer(
    req: &mock_http::Request,
    script: &mock_http::Script<Step>,
    plan: &Mutex<Plan>,
) -> Vec<u8> {
    let close = [("connection".to_string(), "close".to_string())];
    if req.path.ends_with("/models") {
        return mock_http::response(200, &close, "application/json", br#"{"models":[]}"#);
    }
    if req.path.ends_with("/wham/usage") {
        let body = usage_body(&plan.lock().unwrap_or_else(|p| p.into_inner()));
        return mock_http::response(200, &close, "application/json", body.to_string().as_bytes());
    }
    if !req.path.ends_with("/responses") {
        return mock_http::response(
            404,
            &close,
            "application/json",
            br#"{"error":{"message":"mock: no route"}}"#,
        );
    }
    let mut step = script.answer(&req.body, true, Step::Text("Done.".into()));
    let now = chrono::Utc::now().timestamp();
    let mut headers = close.to_vec();
    while let Step::AtUsage {
        primary,
        secondary,
        step: inner,
    } = step
    {
        let mut plan = plan.lock().unwrap_or_else(|p| p.into_inner());
        (plan.primary, plan.secondary) = (primary, secondary);
        for (name, percent, minutes, reset) in [
            ("primary", primary, 300, plan.primary_reset),
            ("secondary", secondary, 10_080, plan.secondary_reset),
        ] {
            headers.push((format!("x-codex-{name}-used-percent"), percent.to_string()));
            headers.push((
                format!("x-codex-{name}-window-minutes"),
                minutes.to_string(),
            ));
            headers.push((format!("x-codex-{name}-reset-at"), reset.to_string()));
        }
        step = *inner;
    }
    let item = match step {
        #[cfg(any(test, feature = "test-doubles"))]
        Step::Hold => {
            // Long past any test: the CLI is stopped before.
            std::thread::sleep(std::time::Duration::from_secs(3600));
            return Vec::new();
        }
        Step::AtUsage { .. } => return Vec::new(),
        Step::UsageLimit { secs } => return usage_limit(now, secs, true, &close),
        #[cfg(any(test, feature = "test-doubles"))]
        Step::UsageLimitUnnamed { secs } => return usage_limit(now, secs, false, &close),
        Step::Text(text) => {
            json!({"type": "message", "id": "msg_mock", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Step::Shell(command) => {
            json!({"type": "function_call", "id": "fc_mock", "call_id": format!("call_mock_{now}_{}", command.len()),
            "name": "exec_command", "arguments": json!({"cmd": command}).to_string(), "status": "completed"})
        }
    };
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_mock", "model": "mock-model", "status": "in_progress"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_mock", "model": "mock-model", "status": "completed", "output": [],
            "usage": {"input_tokens": 1234, "input_tokens_details": {"cached_tokens": 1000}, "output_tokens": 56,
                      "output_tokens_details": {"reasoning_tokens": 7}, "total_tokens": 1290}}}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    mock_http::response(200, &headers, "text/event-stream", sse.as_bytes())
}

/// A 429 `usage_limit_reached` that resets `secs` from `now`, its reset in the body when
/// `named`, always in the `x-codex-*` headers.
fn usage_limit(now: i64, secs: i64, named: bool, close: &[(String, String)]) -> Vec<u8> {
    let mut body = json!({"error": {"type": "usage_limit_reached", "plan_type": "plus"}});
    if named {
        body["error"]["resets_at"] = json!(now + secs);
    }
    let mut headers = close.to_vec();
    headers.push(("x-codex-primary-used-percent".into(), "100".into()));
    headers.push(("x-codex-primary-window-minutes".into(), "300".into()));
    headers.push(("x-codex-primary-reset-at".into(), (now + secs).to_string()));
    mock_http::response(
        429,
        &headers,
        "application/json",
        body.to_string().as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_the_rfc_vectors() {
        // RFC 4648 §10, in the URL alphabet and without padding.
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(plain.as_bytes()), coded);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
