//! The verdicts of startup: pure functions over what the catalog and Feldera said, each
//! refusal naming what was found and what would be accepted.

use super::published::Published;
use super::questions::{Publication, PublicationLookup, PublishedTable, QualifiedName, SlotInfo};
use crate::contract::mapping::{plan_mapping, ColumnMapping, KeyCoverage, MappingOptions};
use crate::contract::partitions::Partition;
use crate::contract::routes::{resolve, PgTable, Route};
use crate::pgoutput::Relation;
use crate::report::with_fix;
use crate::schema::program::{Schema, Table};
use crate::value::PgTypes;
use std::fmt;

/// Why slotline will not start (exit 1, nothing created), and how to fix it when the verdict
/// knows: `slotline check` prints the fix with its finding, a refused start after its reason
/// (`Display`), so the two say the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub fix: Option<String>,
}

impl Refusal {
    pub fn new(message: impl Into<String>) -> Refusal {
        Refusal {
            message: message.into(),
            fix: None,
        }
    }

    pub fn with_fix(mut self, fix: impl Into<String>) -> Refusal {
        self.fix = Some(fix.into());
        self
    }

    /// `fix` for a refusal that has none of its own (the question's, when the verdict did
    /// not say).
    pub fn or_fix(mut self, fix: Option<String>) -> Refusal {
        self.fix = self.fix.or(fix);
        self
    }
}

/// The message, then `(fix: ...)` when there is one.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fix {
            Some(fix) => f.write_str(&with_fix(&self.message, fix)),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Refusal {}

fn refuse<T>(message: impl Into<String>, fix: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(message).with_fix(fix))
}

/// How to fix session settings the server did not apply as pinned.
pub const SESSION_SETTINGS_FIX: &str = "remove whatever overrides the session settings slotline sends (ALTER ROLE/DATABASE ... SET, PGOPTIONS)";
/// How to fix a server too old for slotline (or for a failover slot).
pub const SERVER_VERSION_FIX: &str =
    "upgrade to PostgreSQL 15 or newer (PG_SLOT_FAILOVER=true needs 17)";
/// How to fix a routed table that cannot be read as routed (missing, or a partition routed
/// or published only in part).
pub const RELATION_FIX: &str = "create the table or fix its name in TABLES; of a partitioned table, route only the table itself and publish every partition";
/// How to fix a routed table that does not map onto its Feldera table.
pub const MAPPING_FIX: &str =
    "make the PostgreSQL table, its REPLICA IDENTITY and the Feldera table agree as the message says";
/// How to fix a partition that does not map onto its routed table's Feldera table.
pub const PARTITION_MAPPING_FIX: &str = "make every partition's columns and REPLICA IDENTITY agree with the Feldera table as the message says";
/// How to fix a slot slotline cannot use.
pub const SLOT_FIX: &str = "drop the slot (slotline drop-slot --yes) or choose another PG_SLOT";

/// How to fix a publication that does not exist.
pub fn publication_fix(publication: &str) -> String {
    format!("CREATE PUBLICATION {publication} FOR TABLE <the tables in TABLES>")
}

/// How to fix a publication and `TABLES` that disagree.
pub fn tables_fix(publication: &str) -> String {
    format!(
        "make TABLES and the publication agree (ALTER PUBLICATION {publication} ADD TABLE / DROP TABLE ..., or change TABLES)"
    )
}

/// The session settings the server reports after startup must be the pinned ones: values
/// are decoded from their text, which these settings change.
pub fn pinned_settings(
    date_style: &str,
    time_zone: &str,
    interval_style: &str,
    client_encoding: &str,
) -> Result<(), Refusal> {
    let ok = date_style.starts_with("ISO")
        && time_zone == "UTC"
        && interval_style == "postgres"
        && client_encoding == "UTF8";
    if ok {
        return Ok(());
    }
    refuse(format!(
        "the server did not apply the pinned session settings (reported DateStyle={date_style:?}, TimeZone={time_zone:?}, \
         IntervalStyle={interval_style:?}, client_encoding={client_encoding:?}; required ISO, UTC, postgres, UTF8): \
         values would be decoded wrongly"
    ), SESSION_SETTINGS_FIX)
}

/// The server must be 15 or newer (the `CREATE_REPLICATION_SLOT` option list slotline
/// speaks), and 17 or newer for a failover slot. A server that reports no version (only
/// test doubles do) is not refused.
pub fn server_version(reported: &str, failover: bool) -> Result<(), Refusal> {
    use crate::catalog::slot::{FAILOVER_SERVER_VERSION, MIN_SERVER_VERSION};
    use crate::wire::server_version::parse_server_version;
    if reported.is_empty() {
        return Ok(());
    }
    let Some(version) = parse_server_version(reported) else {
        return refuse(
            format!(
                "cannot read the server's version {reported:?}; slotline needs PostgreSQL 15 or newer"
            ),
            SERVER_VERSION_FIX,
        );
    };
    if version < MIN_SERVER_VERSION {
        return refuse(
            format!(
                "PostgreSQL {reported} is not supported: slotline needs PostgreSQL 15 or newer"
            ),
            SERVER_VERSION_FIX,
        );
    }
    if failover && version < FAILOVER_SERVER_VERSION {
        return refuse(
            format!(
                "PG_SLOT_FAILOVER=true needs PostgreSQL 17 or newer (failover slots); the server is {reported}"
            ),
            SERVER_VERSION_FIX,
        );
    }
    Ok(())
}

/// The publication must exist (its refusal names the ones that do); what it does not
/// publish is a warning.
pub fn publication(
    name: &str,
    lookup: PublicationLookup,
) -> Result<(Publication, Vec<String>), Refusal> {
    let publication = match lookup {
        PublicationLookup::Found(publication) => publication,
        PublicationLookup::Missing { existing, more } => {
            let create = format!("CREATE PUBLICATION {name} FOR TABLE ...");
            if existing.is_empty() {
                return refuse(
                    format!(
                        "publication {name:?} does not exist: this database has no publication; \
                         create it with {create}"
                    ),
                    publication_fix(name),
                );
            }
            let listed: Vec<String> = existing.iter().map(|n| format!("{n:?}")).collect();
            let more = if more { " and more" } else { "" };
            return refuse(
                format!(
                    "publication {name:?} does not exist in this database, which has {}{more}; \
                     set PG_PUBLICATION to one of them, or create it with {create}",
                    listed.join(", ")
                ),
                publication_fix(name),
            );
        }
    };
    let mut warnings = Vec::new();
    let missing: Vec<String> = [
        (
            publication.inserts,
            "insert (rows inserted later never reach Feldera; the copy's rows do)",
        ),
        (
            publication.updates,
            "update (Feldera keeps a row's values from before each update)",
        ),
        (
            publication.deletes,
            "delete (Feldera keeps every row deleted in PostgreSQL)",
        ),
    ]
    .iter()
    .filter(|(published, _)| !published)
    .map(|(_, what)| (*what).to_owned())
    .collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "publication {name} does not publish {}: Feldera then differs from PostgreSQL \
             (ALTER PUBLICATION {name} SET (publish = 'insert, update, delete, truncate'))",
            missing.join(", ")
        ));
    }
    if !publication.truncates {
        warnings.push(format!(
            "publication {name} does not publish TRUNCATE: a truncated table stays full in Feldera \
             (ALTER PUBLICATION {name} SET (publish = 'insert, update, delete, truncate'))"
        ));
    }
    Ok((publication, warnings))
}

/// Every routed table must be published, and every published table routed: otherwise a
/// routed table would never update, or a published one would arrive with nowhere to go. A
/// partition is routed by its partitioned table's route (with `publish_via_partition_root
/// = false` the catalog lists the leaves, not the table the user routes).
pub fn routes_match_publication(
    name: &str,
    routes: &[Route],
    published: &[PublishedTable],
) -> Result<(), Refusal> {
    let routes_table = |r: &Route, t: &QualifiedName| r.source.is(&t.schema, &t.table);
    let covers = |r: &Route, t: &PublishedTable| {
        routes_table(r, &t.name) || t.ancestors.iter().any(|a| routes_table(r, a))
    };
    let not_published: Vec<String> = routes
        .iter()
        .filter(|r| !published.iter().any(|t| covers(r, t)))
        .map(|r| r.source.to_string())
        .collect();
    let not_routed: Vec<String> = published
        .iter()
        .filter(|t| !routes.iter().any(|r| covers(r, t)))
        .map(ToString::to_string)
        .collect();
    if not_published.is_empty() && not_routed.is_empty() {
        return Ok(());
    }
    let mut problems = Vec::new();
    if !not_published.is_empty() {
        problems.push(format!(
            "routed but not in publication {name}: {}",
            not_published.join(", ")
        ));
    }
    if !not_routed.is_empty() {
        problems.push(format!(
            "in publication {name} but not routed (add them to TABLES; for a partition, route its partitioned table): {}",
            not_routed.join(", ")
        ));
    }
    let listed: Vec<String> = published.iter().map(ToString::to_string).collect();
    refuse(
        format!(
            "the publication and TABLES disagree; {}. The publication has: [{}]; TABLES routes: [{}]",
            problems.join("; "),
            listed.join(", "),
            routes
                .iter()
                .map(|r| r.source.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        tables_fix(name),
    )
}

/// The partitions of routed table `routes[route]` (OID `root`): none may be routed as well
/// (its rows would have two destinations), and every leaf must be published, by itself or
/// through a partitioned table above it (else the copy would hold rows the stream never
/// updates).
pub fn partitions_fit(
    publication: &str,
    routes: &[Route],
    route: usize,
    root: u32,
    partitions: &[Partition],
    published: &[PublishedTable],
) -> Result<(), Refusal> {
    let Some(routed) = routes.get(route) else {
        return Ok(());
    };
    let name_of = |p: &Partition| PgTable {
        schema: p.relation.namespace.clone(),
        name: p.relation.name.clone(),
    };
    let routed_twice: Vec<String> = partitions
        .iter()
        .filter(|p| {
            routes
                .iter()
                .any(|r| r.source.is(&p.relation.namespace, &p.relation.name))
        })
        .map(|p| name_of(p).to_string())
        .collect();
    if !routed_twice.is_empty() {
        return refuse(
            format!(
                "{} is partitioned and its partition(s) {} are routed too, so their rows would have two destinations; \
                 route only {} (the rows of every partition go to its Feldera table)",
                routed.source,
                routed_twice.join(", "),
                routed.source
            ),
            RELATION_FIX,
        );
    }
    let is_published = |schema: &str, table: &str| {
        published
            .iter()
            .any(|t| t.name.schema == schema && t.name.table == table)
    };
    if is_published(&routed.source.schema, &routed.source.name) {
        return Ok(());
    }
    let unpublished: Vec<String> = partitions
        .iter()
        .filter(|p| p.leaf)
        .filter(|leaf| {
            // The leaf and the partitioned tables between it and the routed table.
            let mut at = Some(*leaf);
            let mut hops = 0;
            while let Some(p) = at {
                if is_published(&p.relation.namespace, &p.relation.name) {
                    return false;
                }
                hops += 1;
                at = (p.parent != root && hops <= partitions.len())
                    .then(|| partitions.iter().find(|q| q.relation.oid == p.parent))
                    .flatten();
            }
            true
        })
        .map(|p| name_of(p).to_string())
        .collect();
    if unpublished.is_empty() {
        return Ok(());
    }
    refuse(
        format!(
            "{} is routed but its partition(s) {} are not in publication {publication}: the initial copy would hold \
             their rows and the stream would never update them; publish the whole table \
             (ALTER PUBLICATION {publication} ADD TABLE {}) or route another table",
            routed.source,
            unpublished.join(", "),
            routed.source
        ),
        RELATION_FIX,
    )
}

/// What the publication's `publish_via_partition_root` means for the routed tables that
/// are partitioned (`partitioned`, as printed), in one line.
pub fn partition_publishing(publication: &str, via_root: bool, partitioned: &[String]) -> String {
    let setting = format!("publication {publication} has publish_via_partition_root = {via_root}");
    if partitioned.is_empty() {
        return format!("{setting}; no routed table is partitioned, so it changes nothing");
    }
    let tables = partitioned.join(", ");
    if via_root {
        format!(
            "{setting}: rows of every partition arrive as rows of {tables}; PostgreSQL publishes no \
             TRUNCATE of a single partition (Feldera keeps that partition's rows)"
        )
    } else {
        format!(
            "{setting}: rows arrive under each partition and go to the route of {tables}; a partition \
             attached later ends the session once to read the catalog again; a TRUNCATE of only some \
             partitions stops the stream (exit 1)"
        )
    }
}

/// What routed table `table`'s row filter and column list mean for Feldera, a line each
/// (none when the publication publishes all of it): Feldera holds only the matching rows,
/// an UPDATE that moves a row out of the filter arrives as a delete, and a left-out column
/// is NULL (or its DEFAULT) in Feldera whether the row was copied or streamed.
pub fn publication_fidelity(
    publication: &str,
    table: &str,
    published: &Published,
    left_out: &[String],
) -> Vec<String> {
    let mut lines = Vec::new();
    if !published.rows.is_empty() {
        lines.push(format!(
            "publication {publication} publishes only the rows of {table} where {}: the copy reads \
             those rows and Feldera holds only them; an UPDATE that moves a row out of the filter \
             arrives as a delete and one that moves a row in as an insert",
            published.rows.describe()
        ));
    }
    if !left_out.is_empty() {
        lines.push(format!(
            "publication {publication} does not publish column(s) {} of {table} (its column list leaves \
             them out, or they are generated columns it does not publish): neither the copy nor the \
             stream sends their values, so a Feldera column of that name is NULL (or its DEFAULT)",
            left_out.join(", ")
        ));
    }
    lines
}

/// Routed table `table` (or the partitions of it in `secured`) is read through row-level
/// security by `role`: a copy (`COPY (SELECT ...)`) would see only the rows the role's
/// policies let it, while the stream decodes every change whatever the policies say, so
/// Feldera would miss rows and later receive changes of rows it never had. Refused: such a
/// table is never copied (with `SNAPSHOT_MODE=never` nothing is copied and it is not asked).
pub fn row_security(role: &str, table: &str, secured: &[String]) -> Refusal {
    let which = if secured.len() == 1 && secured[0] == table {
        format!("routed table {table} has row-level security that applies to role {role:?}")
    } else {
        format!(
            "row-level security applies to role {role:?} on {} (routed table {table})",
            secured.join(", ")
        )
    };
    Refusal::new(format!(
        "{which}: a copy would read only the rows the role's policies show it, while the stream \
         sends every change whatever the policies say, so Feldera would miss rows"
    ))
    .with_fix(row_security_fix(role, secured))
}

/// How to fix a routed table the role reads through row-level security.
pub fn row_security_fix(role: &str, secured: &[String]) -> String {
    format!(
        "let the role read every row: ALTER ROLE {role} BYPASSRLS (as a superuser), or connect as the \
         table's owner (unless it forces row security), or ALTER TABLE {} DISABLE ROW LEVEL SECURITY; \
         SNAPSHOT_MODE=never copies nothing and is not affected",
        secured.first().map_or("<table>", String::as_str)
    )
}

/// Mappings for every route, in route order, with the warnings to log.
#[derive(Debug)]
pub struct PlannedRoutes {
    pub mappings: Vec<ColumnMapping>,
    /// Each route's Feldera table, in route order.
    pub tables: Vec<Table>,
    pub warnings: Vec<String>,
}

/// Resolves the routes against Feldera's schema and maps each relation (in route order)
/// onto its table. A table whose replica identity cannot carry Feldera's key is refused
/// now, before any slot exists.
pub fn plan_routes(
    routes: &[Route],
    relations: &[Relation],
    types: &PgTypes,
    schema: &Schema,
    require_primary_key: bool,
) -> Result<PlannedRoutes, Refusal> {
    let resolved =
        resolve(routes, schema).map_err(|e| Refusal::new(e.to_string()).with_fix(MAPPING_FIX))?;
    let options = MappingOptions {
        require_primary_key,
    };
    let mut planned = PlannedRoutes {
        mappings: Vec::new(),
        tables: resolved.iter().map(|r| r.table.clone()).collect(),
        warnings: Vec::new(),
    };
    let mut problems = Vec::new();
    for (route, relation) in resolved.iter().zip(relations) {
        match checked_mapping(relation, &route.table, types, options) {
            Ok(mapping) => {
                planned.warnings.extend(mapping.warnings());
                planned.mappings.push(mapping);
            }
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(planned)
    } else {
        refuse(problems.join("\n"), MAPPING_FIX)
    }
}

/// `relation` mapped onto `table`, refused when it cannot be, or when its replica identity
/// cannot name the rows of a keyed Feldera table.
fn checked_mapping(
    relation: &Relation,
    table: &Table,
    types: &PgTypes,
    options: MappingOptions,
) -> Result<ColumnMapping, String> {
    let mapping = plan_mapping(relation, table, types, options).map_err(|e| e.to_string())?;
    match &mapping.key_coverage {
        KeyCoverage::IdentityNothing | KeyCoverage::Missing { .. } if mapping.key.is_some() => {
            Err(format!(
                "{} -> {}: {}",
                mapping.source, mapping.table, mapping.key_coverage
            ))
        }
        _ => Ok(mapping),
    }
}

/// With `publish_via_partition_root = false` a partition's rows arrive under its own
/// Relation message, whose columns may be in another order (they are matched by name) and
/// whose replica identity is its own: every leaf must map onto its route's Feldera table
/// the way a routed table must. `partitions[i]` and `tables[i]` belong to route `i`.
pub fn plan_partitions(
    tables: &[Table],
    partitions: &[Vec<Partition>],
    types: &PgTypes,
    require_primary_key: bool,
) -> Result<(), Refusal> {
    let options = MappingOptions {
        require_primary_key,
    };
    let problems: Vec<String> = tables
        .iter()
        .zip(partitions)
        .flat_map(|(table, partitions)| {
            partitions
                .iter()
                .filter(|p| p.leaf)
                .filter_map(move |p| checked_mapping(&p.relation, table, types, options).err())
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        refuse(problems.join("\n"), PARTITION_MAPPING_FIX)
    }
}

/// Whether another process holds the slot. Not a refusal: after a crash the old walsender
/// keeps the slot until PostgreSQL notices the dead connection, so the session retries.
pub fn slot_in_use(slot: &SlotInfo) -> Option<String> {
    slot.active_pid.map(|pid| {
        format!(
            "replication slot {} is in use by PostgreSQL backend pid {pid} (the walsender of a previous connection not yet noticed dead, \
             another slotline, or a leftover consumer)",
            slot.name
        )
    })
}

/// An existing slot must be a pgoutput logical slot of this database and not lost.
/// A slot of the right kind, in the right database (whether it is still usable is the
/// startup plan's question).
pub fn existing_slot(slot: &SlotInfo, database: &str) -> Result<(), Refusal> {
    if slot.slot_type != "logical" || slot.plugin.as_deref() != Some("pgoutput") {
        return refuse(
            format!(
                "replication slot {} exists but is a {} slot with plugin {:?}; slotline needs a logical pgoutput slot \
                 (drop it or choose another PG_SLOT)",
                slot.name,
                slot.slot_type,
                slot.plugin.as_deref().unwrap_or("none")
            ),
            SLOT_FIX,
        );
    }
    if slot.database.as_deref() != Some(database) {
        return refuse(
            format!(
                "replication slot {} belongs to database {:?}, not {database:?}; choose another PG_SLOT",
                slot.name,
                slot.database.as_deref().unwrap_or("")
            ),
            SLOT_FIX,
        );
    }
    // An invalidated slot (wal_status = lost) is the startup plan's to judge: a snapshot
    // replaces it, stream-only refuses.
    Ok(())
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
