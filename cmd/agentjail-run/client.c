/*
 * agentjail-run: `agentjail run` through the resident launcher.
 *
 *     agentjail-run [RUN FLAGS] -- CMD ARG...
 *
 * is `agentjail run [RUN FLAGS] -- CMD ARG...`, started by a process that
 * `agentjail launcher` started ahead (docs/launcher.md). It connects to the
 * launcher's socket ($AGENTJAIL_LAUNCHER, else launcher.sock in agentjail's
 * run directory: /run/agentjail as root, $XDG_RUNTIME_DIR/agentjail or
 * /tmp/agentjail-UID otherwise), checks that the process listening there
 * runs as its own user, and sends one request in the protocol of Go's
 * package launcher (protocol.go, the specification): its standard
 * descriptors and working directory (SCM_RIGHTS), umask, resource limits,
 * arguments and environment. It then forwards the signals it receives (one
 * byte each) and exits with the run's exit code, the byte the launcher's
 * process answers once the run it took has ended.
 *
 * Where no launcher listens, or none took the request (the launcher
 * stopped while it was queued), it execs the agentjail installed beside
 * it, `agentjail run` itself, so a script may always call agentjail-run; a
 * socket named by $AGENTJAIL_LAUNCHER that cannot be reached is said once
 * on stderr first. A failure of its own, or a refusal, exits 125, as
 * agentjail's do.
 *
 * It is C, static and small because its start is on every launch's path:
 * a Go program's start alone costs more than the launcher saves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define MAGIC "AJL2"         /* launcher.Magic */
#define TAKEN 'T'            /* launcher.Taken */
#define REFUSED 'R'          /* launcher.Refused */
#define MAX_BODY (16 << 20)  /* launcher.MaxBody */
#define EXIT_SETUP 125

extern char **environ;

/* The signals agentjail run acts on (launch.forwarded, SIGWINCH), and
 * SIGTSTP's partners are left alone: the client stops, the run goes on. */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM};

static int sock = -1;
/* Every signal that came: one before the request went is forwarded after
 * it; all of them are raised again if the client runs agentjail itself. */
static volatile sig_atomic_t seen[65];

static int fail(const char *format, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, format);
	vsnprintf(msg, sizeof msg, format, ap);
	va_end(ap);
	dprintf(2, "agentjail-run: %s\n", msg);
	return EXIT_SETUP;
}

/* forward sends the signal to the launcher's process as one byte, once
 * there is a request, and notes it. */
static void forward(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	seen[sig] = 1;
	if (sock >= 0)
		while (write(sock, &b, 1) < 0 && errno == EINTR)
			;
	errno = saved;
}

/* blockForwarded blocks the forwarded signals, old their mask before. */
static void blockForwarded(sigset_t *old)
{
	sigset_t block;
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, old);
}

/* socketPath is where the launcher listens (runstate.RunDir + launcher.sock). */
static void socketPath(char *p, size_t cap, int *explicit)
{
	const char *env = getenv("AGENTJAIL_LAUNCHER");
	*explicit = env && *env;
	if (*explicit) {
		snprintf(p, cap, "%s", env);
		return;
	}
	const char *x = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp"; /* os.TempDir */
	if (getuid() == 0)
		snprintf(p, cap, "/run/agentjail/launcher.sock");
	else if (x && *x)
		snprintf(p, cap, "%s/agentjail/launcher.sock", x);
	else
		snprintf(p, cap, "%s/agentjail-%u/launcher.sock", tmp, (unsigned)getuid());
}

/* trusted reports whether what fd is may be run: root's or the caller's,
 * writable by no one else (and, for the binary, a regular file). */
static int trusted(int fd, int binary, const char *name)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return fail("no launcher, and %s: %s", name, strerror(errno)), 0;
	if ((st.st_uid != 0 && st.st_uid != getuid()) || (st.st_mode & 022) || (binary && !S_ISREG(st.st_mode))) {
		fail("no launcher, and %s may be changed by someone else (owner %u, mode %o): refused; make it root's and not group or world writable", name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		return 0;
	}
	return 1;
}

/* fallback execs `agentjail run ARGS` from the directory agentjail-run is
 * in, if that agentjail and its directory are root's or the caller's and
 * no one else may write them: checked on descriptors (O_PATH, the binary
 * not through a link) and executed through the one checked (execveat). It
 * returns only on failure. */
static int fallback(int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return fail("no launcher, and cannot find agentjail beside agentjail-run: /proc/self/exe: %s", strerror(errno));
	self[n] = 0;
	*strrchr(self, '/') = 0;
	int dir = open(*self ? self : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return fail("no launcher, and agentjail-run's directory %s: %s", self, strerror(errno));
	if (!trusted(dir, 0, self))
		return EXIT_SETUP;
	int bin = openat(dir, "agentjail", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (bin < 0)
		return fail("no launcher, and no agentjail beside agentjail-run: %s/agentjail: %s; install both (make build puts them in bin/), or start `agentjail launcher`", self, strerror(errno));
	if (!trusted(bin, 1, "agentjail beside agentjail-run"))
		return EXIT_SETUP;
	/* From here a signal does what it would do to an agentjail run not
	 * catching signals yet: each that came meanwhile is raised, and one
	 * that comes later takes its default action (no handler is left to
	 * note it and be replaced by the exec). */
	sigset_t old;
	blockForwarded(&old);
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++) {
		signal(forwarded[i], SIG_DFL);
		if (seen[forwarded[i]])
			raise(forwarded[i]);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (!args)
		return fail("out of memory");
	args[0] = "agentjail";
	args[1] = "run";
	for (int i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	syscall(SYS_execveat, bin, "", args, environ, AT_EMPTY_PATH);
	return fail("cannot run %s/agentjail: %s", self, strerror(errno));
}

/* put appends s and its NUL to the body. */
static void put(char **b, const char *s)
{
	size_t n = strlen(s) + 1;
	memcpy(*b, s, n);
	*b += n;
}

/* limit is one resource limit as the protocol writes it: a number or inf. */
static void limit(char *dst, size_t cap, int res, rlim_t cur, rlim_t max)
{
	char c[32], m[32];
	if (cur == RLIM_INFINITY)
		snprintf(c, sizeof c, "inf");
	else
		snprintf(c, sizeof c, "%llu", (unsigned long long)cur);
	if (max == RLIM_INFINITY)
		snprintf(m, sizeof m, "inf");
	else
		snprintf(m, sizeof m, "%llu", (unsigned long long)max);
	snprintf(dst, cap, "%d:%s:%s", res, c, m);
}

int main(int argc, char **argv)
{
	/* Caught from the start, as agentjail run catches them: one that
	 * comes before the request has gone is forwarded after it. */
	struct sigaction sa = {.sa_handler = forward};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
		sigaction(forwarded[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* A standard descriptor the caller closed is /dev/null, as the jail
	 * sees it under agentjail run; it has to exist to be sent. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return fail("descriptor %d is closed, and /dev/null cannot take its place: %s", fd, strerror(errno));
	char path[PATH_MAX];
	int explicit;
	socketPath(path, sizeof path, &explicit);

	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof addr.sun_path)
		return fail("the launcher's socket path is too long (%zu bytes, at most %zu): %s; set AGENTJAIL_LAUNCHER to a shorter one", strlen(path), sizeof addr.sun_path - 1, path);
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (conn < 0)
		return fail("socket: %s", strerror(errno));
	int rc;
	while ((rc = connect(conn, (struct sockaddr *)&addr, sizeof addr)) < 0 && errno == EINTR)
		;
	if (rc < 0) {
		if (explicit)
			dprintf(2, "agentjail-run: warning: no launcher at %s (%s): running agentjail run itself\n", path, strerror(errno));
		close(conn);
		return fallback(argc, argv);
	}
	/* Only a launcher of the caller's own user is given the caller's
	 * descriptors and environment. */
	struct ucred cred;
	socklen_t clen = sizeof cred;
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
		return fail("the launcher at %s: SO_PEERCRED: %s", path, strerror(errno));
	if (cred.uid != geteuid())
		return fail("the launcher at %s runs as uid %u, not as this user (%u): refused; start your own (agentjail launcher) or unset AGENTJAIL_LAUNCHER", path, (unsigned)cred.uid, (unsigned)geteuid());
	/* Nor to one in another mount namespace (a jail of the same user's
	 * that made a socket where this one looks). */
	char theirs[64];
	struct stat mine, other;
	snprintf(theirs, sizeof theirs, "/proc/%d/ns/mnt", (int)cred.pid);
	if (cred.pid > 0 && stat(theirs, &other) < 0 && errno == ENOENT) {
		/* The launcher that made the socket has exited (reaped, or a
		 * zombie, which has no namespaces): a run of its still holds
		 * the socket, and lets go of it shortly. Nothing is sent to
		 * it: agentjail run, as where no launcher listens. */
		if (explicit)
			dprintf(2, "agentjail-run: warning: the launcher at %s is gone: running agentjail run itself\n", path);
		close(conn);
		return fallback(argc, argv);
	}
	if (cred.pid <= 0 || stat("/proc/self/ns/mnt", &mine) < 0 || stat(theirs, &other) < 0 || mine.st_dev != other.st_dev || mine.st_ino != other.st_ino)
		return fail("the launcher at %s is not in this mount namespace (or cannot be seen from it): refused; start your own (agentjail launcher) or unset AGENTJAIL_LAUNCHER", path);

	/* The working directory travels as a descriptor: the same directory
	 * even if its path means another now. One that cannot be opened is
	 * left to agentjail run itself. */
	int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0) {
		close(conn);
		return fallback(argc, argv);
	}

	/* The body: umask, limits, arguments, environment (protocol.go). */
	size_t size = 64;
	size += (size_t)RLIM_NLIMITS * 80;
	for (int i = 1; i < argc; i++)
		size += strlen(argv[i]) + 1;
	int envc = 0;
	for (char **e = environ; *e; e++, envc++)
		size += strlen(*e) + 1;
	if (size > MAX_BODY)
		return fail("arguments and environment of %zu bytes, more than the launcher takes (%d): run agentjail run itself", size, MAX_BODY);
	char *body = malloc(size), *b = body, field[96];
	if (!body)
		return fail("out of memory");
	mode_t mask = umask(0);
	umask(mask);
	snprintf(field, sizeof field, "%o", (unsigned)mask);
	put(&b, field);
	snprintf(field, sizeof field, "%d", RLIM_NLIMITS);
	put(&b, field);
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		struct rlimit rl;
		if (getrlimit(r, &rl) < 0)
			return fail("getrlimit %d: %s", r, strerror(errno));
		limit(field, sizeof field, r, rl.rlim_cur, rl.rlim_max);
		put(&b, field);
	}
	snprintf(field, sizeof field, "%d", argc - 1);
	put(&b, field);
	for (int i = 1; i < argc; i++)
		put(&b, argv[i]);
	snprintf(field, sizeof field, "%d", envc);
	put(&b, field);
	for (char **e = environ; *e; e++)
		put(&b, *e);
	uint32_t len = (uint32_t)(b - body);

	unsigned char head[8];
	memcpy(head, MAGIC, 4);
	head[4] = (unsigned char)len;
	head[5] = (unsigned char)(len >> 8);
	head[6] = (unsigned char)(len >> 16);
	head[7] = (unsigned char)(len >> 24);
	int fds[4] = {0, 1, 2, cwd};
	char ctl[CMSG_SPACE(sizeof fds)];
	memset(ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = head, .iov_len = sizeof head};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	/* A launcher that closed the connection before the request was in
	 * (it stopped, or refused it) will not run it: its answer, if any, is
	 * read below; the end of the stream, a request no run took. */
	int sent = 1;
	ssize_t w;
	while ((w = sendmsg(conn, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
		sent = 0;
	else if (w != (ssize_t)sizeof head)
		return fail("the launcher at %s: sending the request: %s", path, w < 0 ? strerror(errno) : "short write");
	close(cwd);
	for (char *p = body; sent && p < b;) {
		w = write(conn, p, (size_t)(b - p));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
			sent = 0;
		else if (w <= 0)
			return fail("the launcher at %s: sending the request: %s", path, w < 0 ? strerror(errno) : "closed");
		else
			p += w;
	}
	free(body);
	/* The request is in: signals go to the launcher as they come, after
	 * those that came before (blocked meanwhile, so that none is
	 * both kept and sent, or neither). */
	sigset_t old;
	if (sent) {
		blockForwarded(&old);
		sock = conn;
		for (int s = 1; s < 65; s++)
			if (seen[s])
				forward(s);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}

	/* Taken, then the run's exit code; or a refusal and why; or the end
	 * before either: no run took the request, and none will. */
	unsigned char first;
	ssize_t r;
	while ((r = read(conn, &first, 1)) < 0 && errno == EINTR)
		;
	if (r == 0 || (r < 0 && errno == ECONNRESET)) {
		blockForwarded(&old);
		sock = -1;
		sigprocmask(SIG_SETMASK, &old, NULL);
		close(conn);
		if (explicit)
			dprintf(2, "agentjail-run: warning: the launcher at %s stopped before it took the request: running agentjail run itself\n", path);
		return fallback(argc, argv);
	}
	if (r < 0)
		return fail("the launcher at %s: reading its answer: %s", path, strerror(errno));
	if (first == REFUSED) {
		char why[4096];
		size_t n = 0;
		while (n < sizeof why - 1 && ((r = read(conn, why + n, sizeof why - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
			if (r > 0)
				n += (size_t)r;
		why[n] = 0;
		why[strcspn(why, "\n")] = 0;
		return fail("the launcher at %s refused the request: %s", path, *why ? why : "(no reason given)");
	}
	if (first != TAKEN)
		return fail("the launcher at %s answered %d, not a launcher of this release: restart it (agentjail launcher) after installing agentjail", path, first);
	unsigned char code;
	while ((r = read(conn, &code, 1)) < 0 && errno == EINTR)
		;
	if (r != 1)
		return fail("the launcher's process ended without the run's exit code (%s); see the launcher's output", r < 0 ? strerror(errno) : "it closed the connection");
	return code;
}
