//! The PostgreSQL wire protocol: framing backend messages out of a byte stream, encoding
//! frontend messages, and the replication sub-protocol carried in CopyData.

pub mod reader;

pub use reader::Reader;
