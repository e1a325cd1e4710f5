//! Account and host files under /etc, so that uid lookups name the image's user (not the host's)
//! and the hostname resolves.

use crate::spec::Os;

pub struct Account<'a> {
    pub user: &'a str,
    pub full_name: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub group: &'a str,
    pub home: &'a str,
    pub shell: &'a str,
    pub hostname: &'a str,
}

/// (path, contents) for /etc/passwd, /etc/group, /etc/hosts and (Linux) /etc/hostname.
pub fn etc_files(os: Os, a: &Account) -> Vec<(String, String)> {
    match os {
        Os::Linux => linux(a),
        Os::Darwin => darwin(a),
    }
}

fn linux(a: &Account) -> Vec<(String, String)> {
    let passwd = format!(
        "root:x:0:0:root:/root:/bin/bash\n\
         daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
         bin:x:2:2:bin:/bin:/usr/sbin/nologin\n\
         sys:x:3:3:sys:/dev:/usr/sbin/nologin\n\
         sync:x:4:65534:sync:/bin:/bin/sync\n\
         games:x:5:60:games:/usr/games:/usr/sbin/nologin\n\
         man:x:6:12:man:/var/cache/man:/usr/sbin/nologin\n\
         lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin\n\
         mail:x:8:8:mail:/var/mail:/usr/sbin/nologin\n\
         news:x:9:9:news:/var/spool/news:/usr/sbin/nologin\n\
         www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n\
         nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
         systemd-network:x:998:998:systemd Network Management:/:/usr/sbin/nologin\n\
         systemd-timesync:x:996:996:systemd Time Synchronization:/:/usr/sbin/nologin\n\
         messagebus:x:100:102::/nonexistent:/usr/sbin/nologin\n\
         syslog:x:101:103::/nonexistent:/usr/sbin/nologin\n\
         avahi:x:104:110:Avahi mDNS daemon,,,:/run/avahi-daemon:/usr/sbin/nologin\n\
         gdm:x:120:125:Gnome Display Manager:/var/lib/gdm3:/bin/false\n\
         {u}:x:{uid}:{gid}:{n},,,:{h}:{s}\n",
        u = a.user,
        uid = a.uid,
        gid = a.gid,
        n = a.full_name,
        h = a.home,
        s = a.shell
    );
    let group = format!(
        "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:syslog,{u}\ntty:x:5:\ndisk:x:6:\nlp:x:7:\nmail:x:8:\n\
         www-data:x:33:\nsudo:x:27:{u}\naudio:x:29:\nvideo:x:44:\nplugdev:x:46:{u}\nusers:x:100:{u}\n\
         nogroup:x:65534:\ndocker:x:999:{u}\nlpadmin:x:114:{u}\n{g}:x:{gid}:\n",
        u = a.user,
        g = a.group,
        gid = a.gid
    );
    let hosts = format!(
        "127.0.0.1\tlocalhost\n127.0.1.1\t{h}\n\n# The following lines are desirable for IPv6 capable hosts\n::1     ip6-localhost ip6-loopback\nfe00::0 ip6-localnet\nff00::0 ip6-mcastprefix\nff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n",
        h = a.hostname
    );
    vec![
        ("/etc/passwd".into(), passwd),
        ("/etc/group".into(), group),
        ("/etc/hosts".into(), hosts),
        ("/etc/hostname".into(), format!("{}\n", a.hostname)),
    ]
}

fn darwin(a: &Account) -> Vec<(String, String)> {
    const HEAD: &str = "##\n# User Database\n# \n# Note that this file is consulted directly only when the system is running\n# in single-user mode.  At other times this information is provided by\n# Open Directory.\n#\n# See the opendirectoryd(8) man page for additional information about\n# Open Directory.\n##\n";
    // glibc has no Open Directory; the user is listed so uid lookups still answer.
    let passwd = format!(
        "{HEAD}nobody:*:-2:-2:Unprivileged User:/var/empty:/usr/bin/false\n\
         root:*:0:0:System Administrator:/var/root:/bin/sh\n\
         daemon:*:1:1:System Services:/var/root:/usr/bin/false\n\
         _uucp:*:4:4:Unix to Unix Copy Protocol:/var/spool/uucp:/usr/sbin/uucico\n\
         _taskgated:*:13:13:Task Gate Daemon:/var/empty:/usr/bin/false\n\
         _networkd:*:24:24:Network Services:/var/networkd:/usr/bin/false\n\
         _www:*:70:70:World Wide Web Server:/Library/WebServer:/usr/bin/false\n\
         _spotlight:*:89:89:Spotlight:/var/empty:/usr/bin/false\n\
         {u}:*:{uid}:{gid}:{n}:{h}:{s}\n",
        u = a.user,
        uid = a.uid,
        gid = a.gid,
        n = a.full_name,
        h = a.home,
        s = a.shell
    );
    let group = format!(
        "{}nobody:*:-2:\nnogroup:*:-1:\nwheel:*:0:root\ndaemon:*:1:root\nkmem:*:2:root\nsys:*:3:root\n\
         tty:*:4:root\noperator:*:5:root\nstaff:*:20:root,{u}\nadmin:*:80:root,{u}\n",
        HEAD.replace("User Database", "Group Database"),
        u = a.user
    );
    let hosts = "##\n# Host Database\n#\n# localhost is used to configure the loopback interface\n# when the system is booting.  Do not change this entry.\n##\n127.0.0.1\tlocalhost\n255.255.255.255\tbroadcasthost\n::1             localhost\n".to_string();
    vec![
        ("/etc/passwd".into(), passwd),
        ("/etc/group".into(), group),
        ("/etc/hosts".into(), hosts),
    ]
}
