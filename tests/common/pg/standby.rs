//! A primary with a streaming standby made by `pg_basebackup -R`, for the
//! failover tests: the standby is a [`PgCluster`] of its own (its port,
//! sockets, watchdog, cleanup), started from the primary's base backup.

use super::*;

/// postgresql.conf lines a primary needs to feed a standby.
const PRIMARY_CONF: &str = "wal_level = replica\n\
     max_wal_senders = 5\n\
     wal_keep_size = 64MB\n\
     hot_standby = on\n";

/// The harness's pg_hba.conf plus replication connections for `postgres`.
const PRIMARY_HBA: &str = "# pgharbor test harness (replication)\n\
     local all all trust\n\
     local replication postgres trust\n\
     host replication postgres 127.0.0.1/32 trust\n\
     host all trust_user 127.0.0.1/32 trust\n\
     host all md5_user 127.0.0.1/32 md5\n\
     host all all 127.0.0.1/32 scram-sha-256\n";

impl PgCluster {
    /// A private PostgreSQL 15 cluster that can feed streaming standbys
    /// (port below 32768, same roles as [`PgCluster::start`]).
    pub fn start_primary() -> PgCluster {
        PgCluster::start_custom(&Custom {
            certs: Box::new(make_certificates),
            hba: PRIMARY_HBA.to_string(),
            conf: PRIMARY_CONF.to_string(),
        })
    }

    /// A hot standby of this cluster: `pg_basebackup -R` over the primary's
    /// socket, its own port (below 32768) and socket directory; waits until
    /// it accepts connections.
    pub fn start_standby(&self) -> PgCluster {
        let user = server_user();
        let dir = unique_temp_dir("pg-standby");
        let pidfile = dir.join("harness-postmaster.pid");
        let watchdog = spawn_watchdog(&pidfile, "QUIT", &dir);
        let data = dir.join("data");
        let sock = dir.join("sock");
        let log = dir.join("postgres.log");
        std::fs::create_dir(&sock).expect("mkdir sock");
        chown_recursive(&dir, user);

        let mut backup = Command::new(self.bin.join("pg_basebackup"));
        backup
            .arg("-D")
            .arg(&data)
            .args(["-R", "-X", "stream", "--no-sync", "-U", "postgres", "-h"])
            .arg(&self.sock)
            .args(["-p", &self.port.to_string()])
            .current_dir(&dir);
        clean_libpq_env(&mut backup);
        run_as(&mut backup, user);
        let out = backup.output().expect("run pg_basebackup");
        assert!(
            out.status.success(),
            "pg_basebackup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let mut conf = OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .expect("open standby postgresql.conf");
        // Later lines win: the copied file still names the primary's.
        write!(
            conf,
            "\n# standby\nport = {port}\nunix_socket_directories = '{}'\n",
            sock.display()
        )
        .expect("write standby postgresql.conf");
        chown_recursive(&data, user);

        let child = spawn_postmaster(&self.bin, &data, &dir, &log, &pidfile, user);
        let standby = PgCluster {
            dir,
            data,
            sock,
            bin: self.bin.clone(),
            port,
            tls: self.tls,
            ca_cert: self.ca_cert.clone(),
            log,
            postmaster: Mutex::new(Some(child)),
            watchdog: Mutex::new(Some(watchdog)),
        };
        standby.wait_ready("standby start-up");
        standby
    }

    /// `pg_ctl promote` (without waiting): the standby leaves recovery.
    pub fn promote(&self) {
        let mut promote = Command::new(self.bin.join("pg_ctl"));
        promote.args(["promote", "-W", "-D"]).arg(&self.data);
        run_as(&mut promote, server_user());
        let out = promote.output().expect("run pg_ctl promote");
        assert!(
            out.status.success(),
            "pg_ctl promote failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Whether the server is in recovery (a standby), asked over its socket.
    pub fn in_recovery(&self) -> bool {
        self.psql_ok("postgres", "SELECT pg_is_in_recovery()")
            .trim()
            == "t"
    }
}
