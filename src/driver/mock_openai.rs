//! A loopback mock of the OpenAI Responses API for driving the real Codex CLI: std only, 127.0.0.1; `POST /v1/responses` answered as SSE from a script of steps (the last repeats). Ported from the recording's `mock_openai_responses.py`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::mock_http;

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
}

/// The running mock; it serves until the process ends.
pub struct MockOpenAi {
    pub port: u16,
    script: mock_http::Script<Step>,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl MockOpenAi {
    pub fn start() -> std::io::Result<MockOpenAi> {
        let script = mock_http::Script::new();
        let serving = script.clone();
        let port = mock_http::serve(false, move |req| answer(req, &serving))?;
        Ok(MockOpenAi {
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
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

fn answer(req: &mock_http::Request, script: &mock_http::Script<Step>) -> Vec<u8> {
    let close = [("connection".to_string(), "close".to_string())];
    if req.path.ends_with("/models") {
        return mock_http::response(200, &close, "application/json", br#"{"models":[]}"#);
    }
    if !req.path.ends_with("/responses") {
        return mock_http::response(
            404,
            &close,
            "application/json",
            br#"{"error":{"message":"mock: no route"}}"#,
        );
    }
    let step = script.answer(&req.body, true, Step::Text("Done.".into()));
    let now = chrono::Utc::now().timestamp();
    let item = match step {
        Step::UsageLimit { secs } => {
            let body = json!({"error": {"type": "usage_limit_reached", "plan_type": "plus", "resets_at": now + secs}});
            let mut headers = close.to_vec();
            headers.push(("x-codex-primary-used-percent".into(), "100".into()));
            headers.push(("x-codex-primary-window-minutes".into(), "300".into()));
            headers.push(("x-codex-primary-reset-at".into(), (now + secs).to_string()));
            return mock_http::response(
                429,
                &headers,
                "application/json",
                body.to_string().as_bytes(),
            );
        }
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
    mock_http::response(200, &close, "text/event-stream", sse.as_bytes())
}
