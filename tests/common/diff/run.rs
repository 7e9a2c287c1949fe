//! The runner: plays a [`Sequence`] against one target (PostgreSQL
//! directly, or pgharbor in one pool mode) and records what came back as a
//! [`Transcript`] of normalised lines, then checks what the clients left
//! behind (backends that did not go idle, locks, table contents, and
//! what a new client sees). [`compare`] finds the first difference.

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::conn::{cancel_packet, startup, Admin, Conn, Ev};
use super::gen::{Action, Sequence, Until, Who};
use super::msg::{encode_all, Fe, PLACEHOLDER};
use super::norm::{self, Norm};
use crate::common::TEST_DB;

/// The deliberate pause between the pieces of a split write (so that the
/// peer's reads split there too). Not a synchronisation.
pub const PIECE_PAUSE: Duration = Duration::from_millis(2);

/// Where a sequence runs.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub socket: PathBuf,
    /// Through pgharbor (its backends stay after the clients left).
    pub pooled: bool,
    /// The target's letter in its tag (see [`norm::tag`]).
    pub letter: char,
}

/// What the runner needs besides the target.
pub struct Ctx<'a> {
    pub admin: &'a mut Admin,
    /// The role every client of this mode logs in as (its own, so that
    /// pg_stat_activity and pg_locks tell its backends apart from other
    /// tests' and modes').
    pub role: String,
    /// Bound for every read, wait and settle.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub label: String,
    pub items: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Transcript {
    pub groups: Vec<Group>,
}

impl Transcript {
    pub fn show(&self, name: &str) -> String {
        let mut s = format!("transcript of {name}:\n");
        for g in &self.groups {
            s.push_str(&format!("  {}\n", g.label));
            for it in &g.items {
                s.push_str(&format!("      {}\n", truncate(it, 300)));
            }
        }
        s
    }
}

struct Client {
    conn: Option<Conn>,
    writer: Option<JoinHandle<Result<(), String>>>,
    /// An ErrorResponse arrived since the last ReadyForQuery.
    err_since_sync: bool,
    last_tag: Option<u8>,
    /// Why the connection is unusable (closed or silent when it should not be).
    gone: Option<String>,
}

impl Client {
    fn new(conn: Option<Conn>, gone: Option<String>) -> Client {
        Client {
            conn,
            writer: None,
            err_since_sync: false,
            last_tag: None,
            gone,
        }
    }

    /// Waits for the pending write; its error, if any.
    fn join_writer(&mut self) -> Option<String> {
        let h = self.writer.take()?;
        match h.join() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some("writer thread panicked".into()),
        }
    }
}

/// The runner for one sequence on one target.
struct Run<'a, 'b> {
    seq: &'a Sequence,
    target: &'a Target,
    ctx: &'a mut Ctx<'b>,
    tag: String,
    norm: Norm,
    out: Transcript,
}

/// Plays `seq` on `target` and returns what it saw.
pub fn run(seq: &Sequence, target: &Target, ctx: &mut Ctx) -> Transcript {
    let tag = norm::tag(seq.seed, target.letter, seq.mode.short());
    let tables = setup_tables(ctx, &tag);
    let norm = Norm {
        tag: tag.clone(),
        tables,
    };
    let mut r = Run {
        seq,
        target,
        ctx,
        tag,
        norm,
        out: Transcript::default(),
    };
    r.play();
    r.aftermath();
    drop_tables(r.ctx, &r.tag);
    r.out
}

fn setup_tables(ctx: &mut Ctx, tag: &str) -> Vec<(u32, String)> {
    let role = &ctx.role;
    ctx.admin
        .exec(&format!(
            "DROP TABLE IF EXISTS a_{tag}, b_{tag}; \
             CREATE TABLE a_{tag}(id int PRIMARY KEY, v text); \
             INSERT INTO a_{tag} SELECT g, 'r' || g FROM generate_series(1, 5) g; \
             CREATE TABLE b_{tag}(id serial PRIMARY KEY, v text); \
             ALTER TABLE a_{tag} OWNER TO {role}; ALTER TABLE b_{tag} OWNER TO {role}"
        ))
        .unwrap_or_else(|e| panic!("set-up of the tables: {e}"));
    let rows = ctx
        .admin
        .query(&format!(
            "SELECT 'a_{tag}'::regclass::oid::text, 'b_{tag}'::regclass::oid::text"
        ))
        .expect("table oids");
    let oid = |i: usize| -> u32 { rows[0][i].as_deref().unwrap().parse().unwrap() };
    vec![(oid(0), "a_{T}".into()), (oid(1), "b_{T}".into())]
}

fn drop_tables(ctx: &mut Ctx, tag: &str) {
    // A backend left holding a lock would block this; the admin session's
    // lock_timeout bounds the wait and the error is not ours to report
    // (the locks check already did).
    let _ = ctx
        .admin
        .exec(&format!("DROP TABLE IF EXISTS a_{tag}, b_{tag}"));
}

/// Cut points (parts per million) as byte offsets inside `len`.
pub fn cut_offsets(len: usize, cuts: &[u32]) -> Vec<usize> {
    let mut offs: Vec<usize> = cuts
        .iter()
        .map(|&c| (len as u64 * c as u64 / 1_000_000) as usize)
        .filter(|&o| o > 0 && o < len)
        .collect();
    offs.sort_unstable();
    offs.dedup();
    offs
}

impl Run<'_, '_> {
    fn group(&mut self, label: String, items: Vec<String>) {
        self.out.groups.push(Group { label, items });
    }

    /// Logs a client in (with `app` as its application_name, or none).
    fn login(&mut self, who: &str, app: Option<&str>) -> Client {
        let mut items = Vec::new();
        let conn = Conn::connect(&self.target.socket, self.ctx.timeout);
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => {
                self.group(
                    format!("login {who}"),
                    vec![format!("<connect failed: {e}>")],
                );
                return Client::new(None, Some("connect failed".into()));
            }
        };
        let app = app.map(|a| a.replace(PLACEHOLDER, &self.tag));
        let role = self.ctx.role.clone();
        let mut params = vec![("user", role.as_str()), ("database", TEST_DB)];
        if let Some(a) = &app {
            params.push(("application_name", a));
        }
        let ok = conn.send(&startup(&params)).is_ok();
        let deadline = Instant::now() + self.ctx.timeout;
        let mut gone = (!ok).then(|| "startup write failed".to_string());
        while gone.is_none() {
            match conn.read_msg(deadline) {
                Ev::Msg(t, body) => {
                    if t == b'K' && body.len() == 8 {
                        conn.key = Some((
                            i32::from_be_bytes(body[..4].try_into().unwrap()),
                            i32::from_be_bytes(body[4..].try_into().unwrap()),
                        ));
                    }
                    items.push(self.norm.render(t, &body));
                    match t {
                        b'Z' => break,
                        b'E' => gone = Some("login failed".into()),
                        b'R' if body.get(..4) != Some(&[0, 0, 0, 0]) => {
                            gone = Some("asked for a password".into())
                        }
                        _ => {}
                    }
                }
                other => {
                    items.push(show_ev(&self.norm, &other));
                    gone = Some(format!("{other:?} during login"));
                }
            }
        }
        self.group(format!("login {who}"), items);
        Client::new(Some(conn), gone)
    }

    fn play(&mut self) {
        let a = self.login("A", Some("a_{T}"));
        let b = self.login("B", Some("b_{T}"));
        let mut clients = [a, b];
        for (i, step) in self.seq.steps.iter().enumerate() {
            let c = &mut clients[match step.who {
                Who::A => 0,
                Who::B => 1,
            }];
            if let Some(why) = &c.gone {
                let label = format!("step {i} [{:?}]", step.who);
                self.group(label, vec![format!("<not run: {why}>")]);
                continue;
            }
            let start = self.out.groups.len();
            let head = format!("step {i} [{:?}] {}", step.who, step.what);
            self.actions(&head, &step.actions, c);
            if step.cancel {
                for g in &mut self.out.groups[start..] {
                    cancel_outcome(&mut g.items, step.any_outcome);
                }
            }
        }
        for c in &mut clients {
            if let Some(e) = c.join_writer() {
                self.group("final write".into(), vec![format!("<write failed: {e}>")]);
            }
            if let Some(conn) = c.conn.take() {
                conn.close();
            }
        }
    }

    fn actions(&mut self, head: &str, acts: &[Action], c: &mut Client) {
        for (j, act) in acts.iter().enumerate() {
            if c.gone.is_some() {
                return;
            }
            let label = format!("{head}, action {j}");
            match act {
                Action::Send { msgs, cuts } => {
                    if let Some(e) = c.join_writer() {
                        self.group(label.clone(), vec![format!("<write failed: {e}>")]);
                    }
                    let bytes = encode_all(msgs, &self.tag);
                    let offs = cut_offsets(bytes.len(), cuts);
                    let conn = c.conn.as_ref().expect("open connection");
                    let w = conn.writer();
                    c.writer = Some(std::thread::spawn(move || {
                        let mut w = w.map_err(|e| e.to_string())?;
                        write_pieces(&mut w, &bytes, &offs)
                    }));
                }
                Action::SendPartialAndClose { msgs, keep } => {
                    if let Some(e) = c.join_writer() {
                        self.group(label.clone(), vec![format!("<write failed: {e}>")]);
                    }
                    let bytes = encode_all(msgs, &self.tag);
                    let k = ((bytes.len() as u64 * *keep as u64 / 1_000_000) as usize)
                        .clamp(1, bytes.len() - 1);
                    let mut conn = c.conn.take().expect("open connection");
                    // What the peer does not read is not ours to wait for.
                    let _ = conn.send(&bytes[..k]);
                    conn.close();
                    c.gone = Some("closed by the sequence".into());
                }
                Action::Read(until) => {
                    let items = self.read(c, until);
                    self.group(label, items);
                }
                Action::IfCopyIn(inner) => {
                    if c.last_tag == Some(b'G') {
                        self.actions(&format!("{head}, action {j}"), inner, c);
                    }
                }
                Action::WaitActive(marker) => {
                    if let Some(item) = self.wait_active(c, marker) {
                        self.group(label, vec![item]);
                    }
                }
                Action::Cancel { wait } => {
                    if let Some(item) = self.cancel(c, *wait) {
                        self.group(label, vec![item]);
                    }
                }
                Action::Close => {
                    let _ = c.join_writer();
                    if let Some(conn) = c.conn.take() {
                        conn.close();
                    }
                    c.gone = Some("closed by the sequence".into());
                }
                Action::Terminate => {
                    let mut items = Vec::new();
                    if let Some(e) = c.join_writer() {
                        items.push(format!("<write failed: {e}>"));
                    }
                    let mut conn = c.conn.take().expect("open connection");
                    let _ = conn.send(&Fe::Terminate.encode(&self.tag));
                    let deadline = Instant::now() + self.ctx.timeout;
                    loop {
                        let ev = conn.read_msg(deadline);
                        items.push(show_ev(&self.norm, &ev));
                        if !matches!(ev, Ev::Msg(..)) {
                            break;
                        }
                    }
                    conn.close();
                    c.gone = Some("terminated".into());
                    self.group(label, items);
                }
            }
        }
    }

    fn read(&mut self, c: &mut Client, until: &Until) -> Vec<String> {
        let mut items = Vec::new();
        if matches!(until, Until::Replies(_)) && c.err_since_sync {
            return items;
        }
        let deadline = Instant::now() + self.ctx.timeout;
        let mut count = 0;
        let conn = c.conn.as_mut().expect("open connection");
        loop {
            let ev = conn.read_msg(deadline);
            let Ev::Msg(t, body) = &ev else {
                items.push(show_ev(&self.norm, &ev));
                c.gone = Some(format!("{ev:?} while reading", ev = ShortEv(&ev)));
                return items;
            };
            let t = *t;
            items.push(self.norm.render(t, body));
            c.last_tag = Some(t);
            match t {
                b'E' => c.err_since_sync = true,
                b'Z' => c.err_since_sync = false,
                _ => {}
            }
            let done = match until {
                Until::Ready(n) => {
                    count += (t == b'Z') as usize;
                    count >= *n
                }
                Until::Replies(n) => {
                    count +=
                        matches!(t, b'1' | b'2' | b'3' | b'T' | b'n' | b'C' | b's' | b'I') as usize;
                    t == b'E' || count >= *n
                }
                Until::CopyIn => t == b'G' || t == b'Z',
            };
            if done {
                return items;
            }
        }
    }

    fn wait_active(&mut self, c: &mut Client, marker: &str) -> Option<String> {
        let marker = marker.replace(PLACEHOLDER, &self.tag);
        let sql = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
             AND pid <> pg_backend_pid() AND query LIKE '%{marker}%'"
        );
        let deadline = Instant::now() + self.ctx.timeout;
        loop {
            if self.ctx.admin.scalar(&sql).unwrap_or_default() != "0" {
                return None;
            }
            if c.conn.as_mut().is_none_or(|conn| conn.answered()) {
                return None;
            }
            if Instant::now() >= deadline {
                return Some(format!(
                    "<the query was neither running nor answered after {:?}>",
                    self.ctx.timeout
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn cancel(&mut self, c: &mut Client, wait: bool) -> Option<String> {
        let Some((pid, key)) = c.conn.as_ref().and_then(|c| c.key) else {
            return Some("<no BackendKeyData to cancel with>".into());
        };
        let mut cc = match Conn::connect(&self.target.socket, self.ctx.timeout) {
            Ok(cc) => cc,
            Err(e) => return Some(format!("<cancel connection failed: {e}>")),
        };
        let _ = cc.send(&cancel_packet(pid, key));
        if !wait {
            cc.close();
            return None;
        }
        // The server answers a CancelRequest only by closing.
        let ev = cc.read_msg(Instant::now() + self.ctx.timeout);
        cc.close();
        match ev {
            Ev::Closed => None,
            other => Some(format!(
                "<the cancel connection got {} instead of a close>",
                show_ev(&self.norm, &other)
            )),
        }
    }

    /// After the sequence: wait until the role's backends settle, then
    /// record locks, table contents and what a new client sees.
    fn aftermath(&mut self) {
        let role = self.ctx.role.clone();
        // Directly, each client's backend exits after its client left (and
        // after finishing a query it was running). Through the pooler,
        // backends stay, but none may stay busy or inside a transaction.
        // (The role's other backends are the pooler's, idle between
        // sequences; every direct client's application_name has the tag.)
        let cond = if self.target.pooled {
            "state IS DISTINCT FROM 'idle'".to_string()
        } else {
            format!("application_name LIKE '%{}%'", self.tag)
        };
        let sql = format!(
            "SELECT coalesce(string_agg(pid || ' ' || coalesce(state, '?') || ' ' || \
             left(query, 80), '; '), '') FROM pg_stat_activity \
             WHERE usename = '{role}' AND pid <> pg_backend_pid() AND {cond}"
        );
        let locks_sql = format!(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE a.usename = '{role}' AND a.pid <> pg_backend_pid()"
        );
        let deadline = Instant::now() + self.ctx.timeout.max(Duration::from_secs(10));
        // Quiet means: on three polls in a row, no backend busy or inside a
        // transaction and no lock held (a backend on its way out may hold
        // one a moment longer; only locks that stay count).
        let mut quiet = 0;
        let settled = loop {
            let busy = self.ctx.admin.scalar(&sql).unwrap_or_else(|e| e);
            if busy.is_empty() && self.ctx.admin.scalar(&locks_sql).as_deref() == Ok("0") {
                quiet += 1;
                if quiet >= 3 {
                    break "backends settled, no locks held".to_string();
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            quiet = 0;
            if Instant::now() >= deadline {
                let busy = String::from_utf8(norm::replace_bytes(
                    busy.as_bytes(),
                    self.tag.as_bytes(),
                    b"{T}",
                ))
                .unwrap_or_default();
                let locks = self.ctx.admin.scalar(&locks_sql).unwrap_or_else(|e| e);
                break format!(
                    "not settled within the deadline: backends busy or in a transaction: \
                     [{busy}], locks held by the role's backends: {locks}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.group(
            "after the clients left: backends and locks".into(),
            vec![settled],
        );
        let mut items = Vec::new();
        for t in ["a", "b"] {
            let tag = &self.tag;
            let row = self
                .ctx
                .admin
                .query(&format!(
                    "SELECT count(*)::text, \
                     coalesce(md5(string_agg(id || ':' || coalesce(v, '~'), ',' ORDER BY id)), '-'), \
                     coalesce(left(string_agg(id || ':' || left(coalesce(v, '~'), 12), ',' \
                     ORDER BY id), 300), '') FROM {t}_{tag}"
                ))
                .map(|r| {
                    let v = |i: usize| r[0][i].clone().unwrap_or_default();
                    format!("{t}_{{T}}: {} rows md5={} [{}]", v(0), v(1), v(2))
                })
                .unwrap_or_else(|e| format!("{t}_{{T}}: {e}"));
            items.push(row);
        }
        self.group("after the clients left: table contents".into(), items);
        self.probe();
    }

    /// A new client: its login, and that it sees nothing of A's session.
    /// It sets no application_name: it must see the server's default, not
    /// one a pooled backend kept from an earlier client.
    fn probe(&mut self) {
        let mut c = self.login("of a new client", None);
        if c.gone.is_some() {
            return;
        }
        let mut msgs = vec![Fe::describe(false, ""), Fe::Sync];
        for name in self.seq.a_statements.iter().take(4) {
            msgs.push(Fe::describe(false, name));
            msgs.push(Fe::Sync);
        }
        msgs.push(Fe::query(
            "SELECT current_setting('work_mem') AS work_mem, \
             current_setting('DateStyle') AS datestyle, \
             current_setting('TimeZone') AS tz, \
             current_setting('application_name') AS app, \
             (SELECT count(*) FROM pg_listening_channels()) AS listening, \
             (SELECT count(*) FROM pg_cursors) AS cursors, \
             current_setting('transaction_isolation') AS isolation",
        ));
        let n = msgs
            .iter()
            .filter(|m| matches!(m, Fe::Sync | Fe::Query(_)))
            .count();
        let steps = [
            Action::Send { msgs, cuts: vec![] },
            Action::Read(Until::Ready(n)),
            Action::Terminate,
        ];
        self.actions("the next client", &steps, &mut c);
        if let Some(conn) = c.conn.take() {
            conn.close();
        }
    }
}

fn write_pieces(
    w: &mut std::os::unix::net::UnixStream,
    bytes: &[u8],
    offs: &[usize],
) -> Result<(), String> {
    use std::io::Write;
    let mut at = 0;
    for (k, &end) in offs.iter().chain(std::iter::once(&bytes.len())).enumerate() {
        if k > 0 {
            std::thread::sleep(PIECE_PAUSE);
        }
        w.write_all(&bytes[at..end])
            .map_err(|e| format!("{e} after {at} of {} bytes", bytes.len()))?;
        at = end;
    }
    Ok(())
}

struct ShortEv<'a>(&'a Ev);

impl std::fmt::Debug for ShortEv<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Ev::Msg(t, _) => write!(f, "message {:?}", *t as char),
            Ev::Closed => write!(f, "close"),
            Ev::Timeout => write!(f, "timeout"),
            Ev::Garbage(b) => write!(f, "{} unframed bytes", b.len()),
        }
    }
}

fn show_ev(norm: &Norm, ev: &Ev) -> String {
    match ev {
        Ev::Msg(t, b) => norm.render(*t, b),
        Ev::Closed => "<closed>".into(),
        Ev::Timeout => "<timeout: nothing more arrived>".into(),
        Ev::Garbage(b) => format!("<unframed bytes: {}>", norm.val(b)),
    }
}

/// Documented difference 5 (see [`super::norm`]): of a cancel race, only
/// whether it was cancelled (57014) or completed (or, with `any`, neither:
/// timing decides even on PostgreSQL), and the final ReadyForQuery.
fn cancel_outcome(items: &mut Vec<String>, any: bool) {
    let cancelled = items
        .iter()
        .any(|i| i.starts_with("ErrorResponse") && i.contains("C=\"57014\""));
    let completed = items.iter().any(|i| i.starts_with("CommandComplete"));
    let last = items.last().cloned();
    let outcome = match (cancelled, completed) {
        (true, _) if any => "<cancel race: cancelled or completed>",
        (false, true) if any => "<cancel race: cancelled or completed>",
        (true, _) => "<cancel race: cancelled (57014)>",
        (false, true) => "<cancel race: completed>",
        _ => return,
    };
    items.clear();
    items.push(outcome.into());
    if let Some(l) = last.filter(|l| l.starts_with("ReadyForQuery")) {
        items.push(l);
    }
}

/// An error or notice line without its trailing source fields (`F`, `L`,
/// `R`: file, line and routine in PostgreSQL's source), if it has them.
fn without_source(line: &str) -> Option<&str> {
    if !(line.starts_with("ErrorResponse ") || line.starts_with("NoticeResponse ")) {
        return None;
    }
    let at = line.rfind(" F=\"")?;
    let tail = &line[at..];
    let simple = |s: &str, key: &str| -> Option<usize> {
        let rest = s.strip_prefix(key)?;
        let end = rest.find('"')?;
        Some(key.len() + end + 1)
    };
    let a = simple(tail, " F=\"")?;
    let b = simple(&tail[a..], " L=\"")?;
    let c = simple(&tail[a + b..], " R=\"")?;
    (a + b + c == tail.len()).then_some(&line[..at])
}

/// Equal lines, or documented difference 6 (see [`super::norm`]): an
/// error pgharbor answers itself where PostgreSQL would (README: a Parse
/// of a statement name in use under transaction or statement pooling) has
/// no source fields; it is the same error when everything else is equal.
fn same_item(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (without_source(a), without_source(b)) {
        (Some(x), None) => x == b,
        (None, Some(y)) => a == y,
        _ => false,
    }
}

/// The first difference between two transcripts.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The two targets' names.
    pub names: (String, String),
    pub label: String,
    pub index: usize,
    pub direct: Option<String>,
    pub pooled: Option<String>,
    pub direct_group: Vec<String>,
    pub pooled_group: Vec<String>,
}

pub fn compare(names: (&str, &str), direct: &Transcript, pooled: &Transcript) -> Option<Diff> {
    let n = direct.groups.len().max(pooled.groups.len());
    for g in 0..n {
        let (d, p) = (direct.groups.get(g), pooled.groups.get(g));
        if d == p {
            continue;
        }
        let empty = Group {
            label: "<no such group>".into(),
            items: vec![],
        };
        let (d, p) = (d.unwrap_or(&empty), p.unwrap_or(&empty));
        let label = if d.label == p.label {
            d.label.clone()
        } else {
            format!("{} | pooler: {}", d.label, p.label)
        };
        if d.label == p.label
            && d.items.len() == p.items.len()
            && d.items.iter().zip(&p.items).all(|(a, b)| same_item(a, b))
        {
            continue;
        }
        let index = d
            .items
            .iter()
            .zip(&p.items)
            .take_while(|(a, b)| same_item(a, b))
            .count();
        return Some(Diff {
            names: (names.0.to_string(), names.1.to_string()),
            label,
            index,
            direct: d.items.get(index).cloned(),
            pooled: p.items.get(index).cloned(),
            direct_group: d.items.clone(),
            pooled_group: p.items.clone(),
        });
    }
    None
}

impl Diff {
    pub fn show(&self) -> String {
        let cut = |s: &Option<String>| {
            s.as_deref()
                .map(|s| truncate(s, 600))
                .unwrap_or_else(|| "<nothing>".into())
        };
        let list = |items: &[String]| {
            let mut s = String::new();
            for (i, it) in items.iter().enumerate().take(40) {
                s.push_str(&format!("      {i:>3} {}\n", truncate(it, 300)));
            }
            if items.len() > 40 {
                s.push_str(&format!("      … {} more\n", items.len() - 40));
            }
            s
        };
        let (a, b) = &self.names;
        format!(
            "  first difference in {}, message {}:\n    {a}: {}\n    {b}: {}\n  \
             {a}'s replies there:\n{}  {b}'s replies there:\n{}",
            self.label,
            self.index,
            cut(&self.direct),
            cut(&self.pooled),
            list(&self.direct_group),
            list(&self.pooled_group)
        )
    }

    /// One line for summaries.
    pub fn line(&self) -> String {
        format!(
            "{}, message {}: {} {} / {} {}",
            self.label,
            self.index,
            self.names.0,
            truncate(self.direct.as_deref().unwrap_or("<nothing>"), 120),
            self.names.1,
            truncate(self.pooled.as_deref().unwrap_or("<nothing>"), 120)
        )
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
