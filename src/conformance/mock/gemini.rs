//! A loopback mock of the Gemini API (generativelanguage v1beta), for driving the real Gemini CLI: std only, 127.0.0.1, a port the kernel picks; `streamGenerateContent` answered as SSE from a script of steps, the router's `generateContent` with a fixed classification, Code Assist's `loadCodeAssist` as for a retired tier. Ported from the recordings' `mock_gemini.py` and `mock_code_assist.py`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::http as mock_http;

/// One scripted answer to one `streamGenerateContent`.
#[derive(Debug, Clone)]
pub struct Step {
    pub status: u16,
    /// The JSON body of a non-200 answer.
    pub body: Value,
    pub text: Option<String>,
    /// A `functionCall` part: `{"name": …, "args": {…}}`.
    pub call: Option<Value>,
}

impl Step {
    pub fn text(text: &str) -> Step {
        Step {
            status: 200,
            body: Value::Null,
            text: Some(text.into()),
            call: None,
        }
    }

    /// A shell command the model asks the CLI to run.
    pub fn shell(command: &str) -> Step {
        Step {
            status: 200,
            body: Value::Null,
            text: None,
            call: Some(
                json!({"name": "run_shell_command", "args": {"command": command, "description": "owl mock"}}),
            ),
        }
    }

    /// A daily-quota 429, which the CLI does not retry (PROTOCOL.md §6).
    pub fn daily_quota() -> Step {
        Step {
            status: 429,
            body: json!({"error": {"code": 429, "message": "You have exhausted your daily quota on this model.", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
                            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "43200s"}]}}),
            text: None,
            call: None,
        }
    }
}

/// The running mock; it serves until the process ends.
pub struct MockGemini {
    pub port: u16,
    script: mock_http::Script<Step>,
    /// Every `streamGenerateContent` body received, in order.
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl MockGemini {
    pub fn start() -> std::io::Result<MockGemini> {
        let script = mock_http::Script::new();
        let serving = script.clone();
        let port = mock_http::serve(false, move |req| answer(req, &serving))?;
        Ok(MockGemini {
            port,
            requests: script.requests.clone(),
            script,
        })
    }

    /// The steps for the next calls, in order; the last one repeats.
    pub fn script(&self, steps: Vec<Step>) {
        self.script.set(steps);
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many `streamGenerateContent` calls were made.
    #[cfg(any(test, feature = "test-doubles"))]
    pub fn calls(&self) -> usize {
        self.script.calls()
    }
}

fn answer(req: &mock_http::Request, script: &mock_http::Script<Step>) -> Vec<u8> {
    let path = req.path.as_str();
    if path.ends_with(":streamGenerateContent") {
        render(&script.answer(&req.body, true, Step::text("Done.")))
    } else if path.ends_with(":generateContent") {
        // The CLI's model router asks how hard the prompt is.
        let verdict = json!({"complexity_reasoning": "mock", "complexity_score": 10, "reasoning": "mock", "model_choice": "flash"});
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": verdict.to_string()}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}});
        http(200, "application/json", body.to_string().as_bytes())
    } else if path.ends_with(":countTokens") {
        http(200, "application/json", br#"{"totalTokens":1234}"#)
    } else if path.ends_with(":loadCodeAssist") {
        // As Code Assist answers a Google login whose tier the CLI no longer serves
        // (tests/fixtures/gemini-cli-0.61.0/mock_code_assist.py, PROTOCOL.md addendum).
        http(200, "application/json", INELIGIBLE_TIER.as_bytes())
    } else {
        http(
            404,
            "application/json",
            br#"{"error":{"code":404,"message":"mock: no route","status":"NOT_FOUND"}}"#,
        )
    }
}

/// Code Assist's `loadCodeAssist` answer for a retired tier: a current tier, no project,
/// and the reason.
const INELIGIBLE_TIER: &str = r#"{"currentTier":{"id":"free-tier","name":"Gemini Code Assist for individuals"},"ineligibleTiers":[{"reasonCode":"INELIGIBLE_ACCOUNT","reasonMessage":"This account is no longer eligible for Gemini CLI. Use the Antigravity CLI, an API key, or a Gemini Code Assist Standard or Enterprise licence.","tierId":"free-tier","tierName":"Gemini Code Assist for individuals"}]}"#;

fn http(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let close = [("connection".to_string(), "close".to_string())];
    mock_http::response(status, &close, content_type, body)
}

fn render(step: &Step) -> Vec<u8> {
    if step.status != 200 {
        return http(
            step.status,
            "application/json",
            step.body.to_string().as_bytes(),
        );
    }
    let mut parts = Vec::new();
    if let Some(text) = &step.text {
        parts.push(json!({"text": text}));
    }
    if let Some(call) = &step.call {
        parts.push(json!({"functionCall": call}));
    }
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}],
        "modelVersion": "mock-model",
        "responseId": "mock-response",
        "usageMetadata": {"promptTokenCount": 1234, "candidatesTokenCount": 56, "totalTokenCount": 1290},
    });
    http(
        200,
        "text/event-stream",
        format!("data: {chunk}\r\n\r\n").as_bytes(),
    )
}
