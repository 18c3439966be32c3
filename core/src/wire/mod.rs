//! The PostgreSQL wire protocol: framing backend messages out of a byte stream, encoding
//! frontend messages, and the replication sub-protocol carried in CopyData.
//!
//! Everything here is a pure function of bytes; the conversation (which message may come
//! when) lives in `conn`.

pub mod backend;
pub mod framing;
pub mod frontend;
pub mod pg_error;
pub mod reader;
pub mod replication;
pub mod server_version;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::{
    Authentication, BackendKeyData, BackendMessage, CopyResponse, DataRow, FieldDescription,
    Notification, RowDescription, TransactionStatus,
};
pub use framing::{Frame, Framer, MAX_FRAME_LEN};
pub use frontend::{
    EncodeError, StartupParams, StatusUpdate, DISABLED_SERVER_TIMEOUTS, PINNED_SESSION_SETTINGS,
};
pub use pg_error::PgError;
pub use reader::Reader;
pub use replication::{PrimaryKeepalive, ReplicationMessage, XLogData};
