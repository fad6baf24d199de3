//! Where the Docker Engine puts a container's cgroup on its host, for the lifecycle to read the
//! container's main process and resources there ([`worker_sandbox::engine::CgroupLayout`]):
//! the names dockerd gives a container's cgroup when no cgroup parent is set, under each
//! driver and cgroup version.

use worker_sandbox::engine::CgroupLayout;
use worker_sandbox::evidence::EngineFacts;

/// The Docker Engine's layout under the cgroup driver its `facts` report.
pub(crate) fn layout(facts: &EngineFacts) -> CgroupLayout {
    CgroupLayout {
        procs_dirs: [
            "pids/docker/{id}",
            "pids/system.slice/docker-{id}.scope",
            "docker/{id}",
            "system.slice/docker-{id}.scope",
        ]
        .map(String::from)
        .to_vec(),
        // Under cgroupfs every container's cgroup is made under `docker/`, so a started
        // container missing there has stopped and been cleaned up; systemd's scopes come and
        // go under a slice other units share, so their absence proves nothing.
        parents: if facts.cgroup_driver == "cgroupfs" {
            ["pids/docker", "docker"].map(String::from).to_vec()
        } else {
            Vec::new()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn under(driver: &str) -> CgroupLayout {
        layout(&EngineFacts {
            cgroup_driver: driver.into(),
            ..EngineFacts::default()
        })
    }

    #[test]
    fn dockerd_s_cgroup_names_are_looked_up_under_either_driver_and_version() {
        let cgroupfs = under("cgroupfs");
        assert_eq!(
            cgroupfs.procs_dirs,
            [
                "pids/docker/{id}",
                "pids/system.slice/docker-{id}.scope",
                "docker/{id}",
                "system.slice/docker-{id}.scope",
            ]
        );
        assert_eq!(cgroupfs.parents, ["pids/docker", "docker"]);
        let systemd = under("systemd");
        assert_eq!(systemd.procs_dirs, cgroupfs.procs_dirs);
        assert!(systemd.parents.is_empty(), "a missing scope proves no stop");
    }
}
