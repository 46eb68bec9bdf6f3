//! owl's loopback mocks of the agents' APIs (ADR-0018): what each CLI is run against in the conformance check and the end-to-end tests, serving the shapes recorded from the real APIs.

pub mod api;
pub mod gemini;
mod http;
pub mod openai;
