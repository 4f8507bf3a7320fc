//! orq's server: the HTTP API (`/api/v1`), the dashboard at `/`, the built-in handlers and the
//! command line of the `orq` binary. `app(state)` builds the router without a socket so tests
//! can drive it directly.

pub mod api;
pub mod cli;
pub mod dashboard;
pub mod error;
pub mod handlers;
pub mod live;
pub mod model;
pub mod timelines;

pub use api::{app, AppState};
pub use error::ApiError;
