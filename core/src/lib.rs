//! slotline-core: the sans-io heart of slotline.
//!
//! Everything here is a pure function or a state machine driven by inputs. The core never
//! reads a clock, the environment, a socket or a file, and never sleeps or spawns: time and
//! randomness arrive as inputs, and every side effect leaves as a command for a shell to
//! execute. That is what lets every acknowledgement, batching, retry and crash decision be
//! tested without a database.
#![forbid(unsafe_code)]

pub mod ack;
pub mod backoff;
pub mod completion;
pub mod config;
pub mod conn;
pub mod contract;
pub mod convert;
pub mod copy;
pub mod crash;
pub mod error;
pub mod feldera;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod io;
pub mod lsn;
pub mod ops;
pub mod outbox;
pub mod pgoutput;
pub mod pipeline;
pub mod retract;
pub mod snapshot;
pub mod startup;
pub mod status;
pub mod time;
pub mod timer;
pub mod value;
pub mod wire;

pub use error::{DecodeError, DecodeErrorKind};
pub use lsn::Lsn;
