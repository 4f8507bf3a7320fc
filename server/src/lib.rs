//! orq's server: the HTTP API (`/api/v1`), the dashboard at `/`, the built-in handlers, the
//! command line of the `orq` binary, API keys ([`auth`]), the submit rate limit ([`ratelimit`])
//! and the HTTP server loop with its timeouts ([`serve`]). `app(state)` builds the router without
//! a socket so tests can drive it directly.

pub mod admin;
pub mod api;
pub mod auth;
pub mod cli;
pub mod config;
pub mod cross_origin;
pub mod dashboard;
pub mod dashboard_files;
pub mod error;
pub mod error_code;
pub mod extract;
pub mod handlers;
pub mod key_slots;
pub mod live;
pub mod loopback_host;
pub mod metrics;
pub mod model;
pub mod names;
pub mod openapi;
pub mod openapi_errors;
pub mod pull;
pub mod ratelimit;
pub mod redis_checks;
pub mod security_headers;
pub mod serve;
pub mod simulations;
pub mod telemetry;
pub mod timelines;

pub use api::{app, AppState};
pub use error::ApiError;
