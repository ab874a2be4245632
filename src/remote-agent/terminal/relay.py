# Terminal relay: owns one pseudo-terminal for one workload, so a terminal lives as long as the
# process that started this relay (the host daemon), not as long as an SSH channel. Node cannot
# allocate a pty, so the daemon runs this with the host's python3 (>= 3.6, standard library only).
#
# Descriptors (set up by the driver, terminal/driver.ts):
#   0  input   bytes for the terminal (written to the master; EOF only stops input)
#   1  output  everything the terminal shows (read from the master)
#   2  diagnostics of the relay itself
#   3  control JSON lines in: first {"type":"launch",...}, then resize / signal
#   4  status  JSON lines out: spawned | spawn-failed, resized, exit
#   5  the exec's tag (only when the launch says so): given to the workload as fd 47, never kept
#      (a relay started ahead of its exec gets the tag file's path in the launch instead, "tagPath":
#      opened by the workload's side only, as fd 47)
# SIGTERM to the relay, EOF on control or an unwritable output/status all mean the same: hang up.
# `--probe` checks that this interpreter can allocate and size a pty, prints one JSON line, exits.
#
# Data is copied one chunk at a time in each direction: nothing is read from the master while
# output is pending, nothing from input while the master has not taken the previous chunk.
import errno
import fcntl
import json
import os
import select
import signal
import struct
import sys
import termios
import time

CHUNK = 65536
IN, OUT, ERR, CTL, STATUS, TAG_SRC = 0, 1, 2, 3, 4, 5
TAG_FD = 47
MAX_CONTROL_LINE = 8 * 1024 * 1024
# After the workload exits, output still in the pty is forwarded until nothing arrived for
# DRAIN_IDLE seconds (a background process may keep the terminal open), at most DRAIN_MAX;
# time spent waiting for the controller to take output does not count.
DRAIN_IDLE = 1.0
DRAIN_MAX = 10.0
# On hang-up the session gets SIGHUP; whatever still runs after this many seconds is SIGKILLed.
HANGUP_GRACE = 1.0
# A resize is acknowledged once the foreground group took its SIGWINCH, waiting at most this long,
# and once it is back to waiting (it has run its handler), waiting at most SETTLE_WAIT for that.
WINCH_WAIT = 0.8
SETTLE_WAIT = 0.1
IUTF8 = getattr(termios, "IUTF8", 0o40000 if sys.platform.startswith("linux") else 0)


def to_bytes(s):
    return s.encode("utf-8")


def winsize(rows, cols):
    return struct.pack("HHHH", rows, cols, 0, 0)


def valid_size(rows, cols):
    ok = lambda n: isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 65535
    return ok(rows) and ok(cols)


def slave_size(name):
    """(rows, cols) as the terminal side sees it, or None when it cannot be opened any more."""
    try:
        fd = os.open(name, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        rows, cols = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, winsize(0, 0)))[:2]
        return rows, cols
    except OSError:
        return None
    finally:
        os.close(fd)


def start_time(pid):
    """Field 22 of /proc/<pid>/stat (clock ticks since boot), or "" where there is no /proc."""
    fields = proc_fields(pid)
    return fields[19] if fields and len(fields) > 19 else ""


def proc_fields(pid):
    """Fields of /proc/<pid>/stat after the command name (state is [0]), or None."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            text = f.read().decode("ascii", "replace")
        return text[text.rindex(")") + 2:].split(" ")
    except (OSError, ValueError):
        return None


def proc_pids():
    try:
        return [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def winch_pending(pgrp):
    """Whether a process of group `pgrp` still has SIGWINCH pending (not blocked, not stopped: a
    stopped one, e.g. in a paused workspace, takes it only when continued; waiting for it would only
    bring the answer nearer Paseo's 1000 ms limit)."""
    bit = 1 << (signal.SIGWINCH - 1)
    for name in proc_pids():
        fields = proc_fields(name)
        if not fields or len(fields) < 3 or fields[2] != str(pgrp) or fields[0] in ("T", "t"):
            continue
        masks = {}
        try:
            with open("/proc/%s/status" % name) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("SigPnd", "ShdPnd", "SigBlk"):
                        masks[key] = int(value.strip(), 16)
        except (OSError, ValueError):
            continue
        if (masks.get("SigPnd", 0) | masks.get("ShdPnd", 0)) & bit and not masks.get("SigBlk", 0) & bit:
            return True
    return False


def group_running(pgrp):
    """Whether a process of group `pgrp` is running or waiting for a CPU (state R)."""
    for name in proc_pids():
        fields = proc_fields(name)
        if fields and len(fields) > 2 and fields[2] == str(pgrp) and fields[0] == "R":
            return True
    return False


def session_members(sid, since):
    """Pids in session `sid` that started no earlier than its leader (a reused id is foreign)."""
    out = []
    for name in proc_pids():
        fields = proc_fields(name)
        if fields and len(fields) > 19 and fields[3] == str(sid) and fields[0] != "Z":
            if not since or not fields[19].isdigit() or int(fields[19]) >= int(since):
                out.append(int(name))
    return out


def probe():
    if sys.version_info < (3, 6):
        raise SystemExit("python >= 3.6 required")
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, winsize(7, 9))
    got = slave_size(os.ttyname(slave))
    os.close(slave)
    os.close(master)
    if got != (7, 9):
        raise SystemExit("the pty did not take its size")
    version = "%d.%d.%d" % sys.version_info[:3]
    sys.stdout.write(json.dumps({"ok": True, "version": version, "executable": sys.executable}) + "\n")


class Controller:
    """The daemon's side of things: status lines out, control lines in."""

    def __init__(self):
        self.gone = False
        self.buf = b""

    def send(self, msg):
        data = to_bytes(json.dumps(msg, separators=(",", ":")) + "\n")
        try:
            while data:
                data = data[os.write(STATUS, data):]
        except OSError:
            self.gone = True

    def read_lines(self):
        """Complete lines now available; None at EOF (or error)."""
        try:
            chunk = os.read(CTL, CHUNK)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EINTR):
                return []
            return None
        if not chunk:
            return None
        self.buf += chunk
        if len(self.buf) > MAX_CONTROL_LINE and b"\n" not in self.buf:
            return None
        return self.buffered()

    def buffered(self):
        """Messages of the complete lines received so far (some may arrive with the launch)."""
        *lines, self.buf = self.buf.split(b"\n")
        out = []
        for line in lines:
            try:
                msg = json.loads(line.decode("utf-8"))
            except ValueError:
                continue
            if isinstance(msg, dict):
                out.append(msg)
        return out

    def read_launch(self):
        while True:
            chunk = os.read(CTL, CHUNK)
            if not chunk:
                return None
            self.buf += chunk
            if b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                return json.loads(line.decode("utf-8"))
            if len(self.buf) > MAX_CONTROL_LINE:
                return None


def child(launch, slave, errw):
    """In the forked child: become the terminal's session, then exec exactly what was asked."""
    try:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        keep = {0, 1, 2, errw}
        tag_path = launch.get("tagPath")
        if launch.get("tag") or isinstance(tag_path, str):
            if errw == TAG_FD:
                errw = os.dup(errw)
                keep.add(errw)
            if isinstance(tag_path, str):
                tag = os.open(to_bytes(tag_path), os.O_WRONLY | os.O_NOFOLLOW)
                if tag != TAG_FD:
                    os.dup2(tag, TAG_FD)
                    os.close(tag)
                else:
                    os.set_inheritable(TAG_FD, True)
            else:
                os.dup2(TAG_SRC, TAG_FD)
            keep.add(TAG_FD)
        try:
            fds = [int(n) for n in os.listdir("/proc/self/fd")]
        except OSError:
            fds = list(range(3, 256))
        for fd in fds:
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        # Python ignores SIGPIPE and SIGXFSZ and handles others; ignored dispositions survive exec.
        for name in ("SIGPIPE", "SIGXFSZ", "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCHLD"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.chdir(to_bytes(launch["cwd"]))
        argv = [to_bytes(launch["argv0"])] + [to_bytes(a) for a in launch["args"]]
        env = dict((to_bytes(k), to_bytes(v)) for k, v in launch["env"].items())
        os.execve(to_bytes(launch["file"]), argv, env)
    except OSError as e:
        code = 127 if e.errno == errno.ENOENT else 126
        reason = os.strerror(e.errno) if e.errno else str(e)
        report = "%d %s" % (code, reason)
    except BaseException as e:  # a bad launch message; still report like a shell would
        code = 126
        reason = str(e) or type(e).__name__
        report = "%d %s" % (code, reason)
    try:
        os.write(2, to_bytes("paseo-ssh-runtime: %s: %s\n" % (launch.get("argv0", "?"), reason)))
    except Exception:
        pass
    try:
        os.write(errw, to_bytes(report))
    except Exception:
        pass
    os._exit(code)


class Relay:
    def __init__(self, ctl, launch):
        self.ctl = ctl
        self.launch = launch
        self.pid = None
        self.status = None  # wait status once reaped
        self.out_buf = b""
        self.in_buf = b""
        self.in_open = True
        self.master = None
        self.started = ""
        self.hangup_requested = False

    def start(self):
        rows, cols = self.launch.get("rows"), self.launch.get("cols")
        if not valid_size(rows, cols):
            raise SystemExit("invalid terminal size")
        master, slave = os.openpty()
        # Size and modes are in place before the workload exists, so its first look is right.
        fcntl.ioctl(master, termios.TIOCSWINSZ, winsize(rows, cols))
        attrs = termios.tcgetattr(slave)
        attrs[0] |= IUTF8
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.slave_name = os.ttyname(slave)
        errr, errw = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(master)
            os.close(errr)
            child(self.launch, slave, errw)
        self.pid = pid
        self.master = master
        os.close(slave)
        os.close(errw)
        if self.launch.get("tag"):
            os.close(TAG_SRC)  # the workload has it as fd 47; this process must never hold it
        failure = b""
        while True:
            chunk = os.read(errr, 4096)
            if not chunk:
                break
            failure += chunk
        os.close(errr)
        if failure:
            code, _, reason = failure.decode("utf-8", "replace").partition(" ")
            self.ctl.send({"type": "spawn-failed", "code": int(code), "message": reason})
        else:
            self.started = start_time(pid)
            self.ctl.send(
                {"type": "spawned", "pid": pid, "pgid": os.getpgid(pid), "sid": os.getsid(pid), "startTime": self.started}
            )
        for fd in (IN, OUT, CTL, master):
            os.set_blocking(fd, False)

    def reap(self, block=False):
        if self.status is not None:
            return True
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == self.pid:
            self.status = status
            return True
        return False

    def on_control(self, msg):
        kind = msg.get("type")
        if kind == "resize":
            self.ctl.send({"type": "resized", "id": msg.get("id"), "ok": self.resize(msg.get("rows"), msg.get("cols"))})
        elif kind == "signal":
            name = msg.get("signal")
            sig = getattr(signal, name, None) if isinstance(name, str) and name.startswith("SIG") else None
            if isinstance(sig, signal.Signals) and self.status is None:
                try:
                    os.killpg(os.getpgid(self.pid), sig)
                except OSError:
                    pass

    def resize(self, rows, cols):
        if self.master is None or self.status is not None or not valid_size(rows, cols):
            return False
        try:
            # The kernel sends SIGWINCH to the terminal's foreground process group.
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, winsize(rows, cols))
            pgrp = os.tcgetpgrp(self.master)
        except OSError:
            return False
        if slave_size(self.slave_name) != (rows, cols):
            return False
        # Input sent after the answer must not overtake the signal: wait until it is delivered, then
        # until the group is back to waiting. A program that took the signal but has not run yet
        # (a busy machine) may otherwise find the input and its SIGWINCH in the same wake-up and
        # read first (node does: its event loop handles signals after I/O).
        deadline = time.monotonic() + WINCH_WAIT
        while winch_pending(pgrp) and time.monotonic() < deadline:
            time.sleep(0.002)
        settle = min(deadline, time.monotonic() + SETTLE_WAIT)
        while group_running(pgrp) and time.monotonic() < settle:
            time.sleep(0.002)
        return True

    def write_out(self):
        try:
            n = os.write(OUT, self.out_buf)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EINTR):
                return
            self.ctl.gone = True  # nobody reads the terminal any more
            return
        self.out_buf = self.out_buf[n:]

    def read_master(self):
        """False once the terminal has no writer left (EIO on Linux, EOF elsewhere).

        A pty hands out a few KiB per read: what is already there is gathered, up to one chunk."""
        parts, size = [], 0
        while size < CHUNK:
            try:
                chunk = os.read(self.master, CHUNK - size)
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EINTR):
                    break
                if not parts:
                    return False
                break  # deliver what was read; the next read reports the end again
            if not chunk:
                if not parts:
                    return False
                break
            parts.append(chunk)
            size += len(chunk)
        self.out_buf = b"".join(parts)
        return True

    def run(self, wake):
        for msg in self.ctl.buffered():
            self.on_control(msg)
        self.reap()
        idle_since = None  # after the exit: when output last moved
        drain_used = 0.0  # after the exit: time spent waiting for output that may still come
        while not self.ctl.gone and not self.hangup_requested:
            exited = self.status is not None
            if exited and idle_since is None:
                idle_since = time.monotonic()
                self.in_open = False
                self.in_buf = b""
            if self.master is None and not exited:
                self.in_open = False  # nothing can take input any more; wait for the exit only
                self.in_buf = b""
            rlist, wlist = [wake, CTL], []
            if self.master is not None and not self.out_buf:
                rlist.append(self.master)
            if self.out_buf:
                wlist.append(OUT)
            if self.in_open and not self.in_buf:
                rlist.append(IN)
            if self.in_buf:
                wlist.append(self.master)
            timeout = None
            waiting_for_output = exited and not self.out_buf
            if waiting_for_output:
                if self.master is None:
                    break
                timeout = min(DRAIN_IDLE - (time.monotonic() - idle_since), DRAIN_MAX - drain_used)
                if timeout <= 0:
                    break
            before = time.monotonic()
            r, w, _ = select.select(rlist, wlist, [], timeout)
            if waiting_for_output:
                drain_used += time.monotonic() - before
            if wake in r:
                try:
                    while os.read(wake, 4096):
                        pass
                except OSError:
                    pass
                self.reap()
            if CTL in r:
                lines = self.ctl.read_lines()
                if lines is None:
                    self.ctl.gone = True
                    break
                for msg in lines:
                    self.on_control(msg)
            if OUT in w:
                self.write_out()
                if idle_since is not None:
                    idle_since = time.monotonic()
            if self.master is not None and self.master in r:
                if self.read_master():
                    if idle_since is not None:
                        idle_since = time.monotonic()
                    self.write_out()  # usually the reader is waiting: no need for another select
                else:
                    # No writer is left on the terminal: everything it showed has been read.
                    os.close(self.master)
                    self.master = None
            if IN in r:
                self.read_input()
                if self.in_buf and self.master is not None:
                    self.write_master()
            elif self.in_buf and self.master is not None and self.master in w:
                self.write_master()
        if self.ctl.gone or self.hangup_requested:
            self.hangup()
        if self.master is not None:
            os.close(self.master)
            self.master = None
        self.reap(block=True)
        try:
            os.close(OUT)
        except OSError:
            pass
        self.report_exit()

    def read_input(self):
        try:
            chunk = os.read(IN, CHUNK)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EINTR):
                self.in_open = False
            return
        if chunk:
            self.in_buf = chunk
        else:
            self.in_open = False  # a terminal has no end of input: stop reading, nothing else

    def write_master(self):
        """Writes what the terminal takes now (a pty accepts a few KiB per write)."""
        while self.in_buf:
            try:
                n = os.write(self.master, self.in_buf)
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EINTR):
                    self.in_buf = b""
                    self.in_open = False
                return
            self.in_buf = self.in_buf[n:]

    def hangup(self):
        """The controller is gone (or asked to stop): end the terminal and its session, bounded."""
        if self.master is not None:
            os.close(self.master)  # the kernel hangs up the terminal: SIGHUP to the session leader
            self.master = None
        if self.status is None:
            for sig in (signal.SIGHUP, signal.SIGCONT):
                try:
                    os.killpg(os.getpgid(self.pid), sig)
                except OSError:
                    pass
            deadline = time.monotonic() + HANGUP_GRACE
            while not self.reap() and time.monotonic() < deadline:
                time.sleep(0.01)
        # Whatever is left of the session (a leader ignoring SIGHUP, its children) is SIGKILLed.
        deadline = time.monotonic() + 2 * HANGUP_GRACE
        while time.monotonic() < deadline:
            self.reap()
            members = [p for p in session_members(self.pid, self.started) if p != os.getpid()]
            if self.status is None and self.pid not in members:
                members.append(self.pid)
            if not members:
                break
            for p in members:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def report_exit(self):
        status = self.status
        if status is None:
            return
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = "SIG%d" % sig
            self.ctl.send({"type": "exit", "code": None, "signal": name})
        else:
            self.ctl.send({"type": "exit", "code": os.WEXITSTATUS(status), "signal": None})


def main():
    if sys.argv[1:] == ["--probe"]:
        return probe()
    for name in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    ctl = Controller()
    launch = ctl.read_launch()
    if not isinstance(launch, dict) or launch.get("type") != "launch":
        raise SystemExit("no launch message")
    relay = Relay(ctl, launch)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def on_term(*_):
        relay.hangup_requested = True

    signal.signal(signal.SIGTERM, on_term)
    relay.start()
    try:
        relay.run(wake_r)
    except BaseException:
        # A fault here must not leave the workload half-alive either: report it, then hang up.
        import traceback  # only here: it costs start-up time

        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        relay.hangup()
        relay.report_exit()
        os._exit(1)


if __name__ == "__main__":
    main()
