/*
 * agentjail-exec: the jail's exec stage, the last step before the agent.
 *
 * bwrap runs it inside every jail as
 *
 *     /dev/.agentjail-exec [--report-fd N] [--control-fd N] [--pty] [--listen IP:PORT]...
 *                          [--rlimit NAME=VALUE]... -- CMD ARG...
 *
 * It speaks the protocol of Go's package execstage (protocol.go), which is
 * the specification; execstage.Main is the same stage in Go, which agentjail
 * itself runs where this binary is not installed. Both pass the same tests
 * (execstage/stage_linux_test.go runs each case against each).
 *
 * With --pty it gives the agent a terminal of its own (open_pty, as
 * execstage's openPty: a new session, a pty of the jail's devpts as its
 * controlling terminal and the agent's 0, 1 and 2, the master sent to the
 * supervisor as {"kind":"pty",...} and the supervisor's answer awaited).
 * It makes each listener (a TCP socket listening on IP:PORT in the jail's
 * network namespace) and sends it to the supervisor over the control
 * channel (execstage/control.go: one SOCK_SEQPACKET message, a JSON object
 * and SCM_RIGHTS), then applies each rlimit to itself, soft = hard, so that every process of
 * the agent inherits it and none can raise it (a value above the hard limit
 * it inherited, which it may not raise without CAP_SYS_RESOURCE, becomes
 * that hard limit, and the report says so); marks every descriptor above 2
 * close-on-exec; looks CMD up on the jail's PATH as execvp(3) does and
 * execs it. On the report descriptor (close-on-exec: EOF after the rlimit
 * lines means the exec happened) it writes one JSON line per rlimit and, if
 * the exec fails, {"path":P,"errno":N}, exiting 127 (not found) or 126;
 * a failure of its own is {"error":MSG}, exit 125.
 *
 * It is C, static and small because it starts in every launch: a Go
 * program's runtime start alone costs a launch more than all of this does
 * (docs/benchmarks.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define NPROC_VAR "AGENTJAIL_NPROC" /* execstage.NprocVar */
#define MAX_LIMITS 32
#define MAX_LISTEN 8
#define MAX_MESSAGE 4096 /* execstage.MaxMessage */
#define MAX_FILES 4      /* execstage.MaxFiles */

extern char **environ;

static const struct {
	const char *name;
	int resource;
} resources[] = {
	{"as", RLIMIT_AS}, {"core", RLIMIT_CORE}, {"cpu", RLIMIT_CPU},
	{"data", RLIMIT_DATA}, {"fsize", RLIMIT_FSIZE}, {"locks", RLIMIT_LOCKS},
	{"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
	{"nofile", RLIMIT_NOFILE}, {"nproc", RLIMIT_NPROC}, {"rss", RLIMIT_RSS},
	{"rtprio", RLIMIT_RTPRIO}, {"rttime", RLIMIT_RTTIME}, {"sigpending", RLIMIT_SIGPENDING},
	{"stack", RLIMIT_STACK},
};

static int report = -1;

/* out writes all of buf to fd, retrying short writes. */
static void out(int fd, const char *buf, size_t n)
{
	while (n > 0 && fd >= 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
	}
}

/* jsonString appends s to b (of capacity cap, at *len) as a JSON string. */
static void jsonString(char *b, size_t cap, size_t *len, const char *s)
{
	size_t n = *len;
	if (n < cap)
		b[n++] = '"';
	for (; *s && n + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			b[n++] = '\\';
			b[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(b + n, cap - n, "\\u%04x", c);
		} else {
			b[n++] = (char)c;
		}
	}
	if (n < cap)
		b[n++] = '"';
	*len = n;
}

/* fail reports a failure of the stage's own and returns exit code 125. */
static int fail(const char *format, ...)
{
	char msg[1024], line[2200];
	va_list ap;
	va_start(ap, format);
	vsnprintf(msg, sizeof msg, format, ap);
	va_end(ap);
	dprintf(2, "agentjail: exec stage: %s\n", msg);
	size_t n = 0;
	n += (size_t)snprintf(line, sizeof line, "{\"error\":");
	char full[1100];
	snprintf(full, sizeof full, "exec stage: %s", msg);
	jsonString(line, sizeof line - 2, &n, full);
	line[n++] = '}';
	line[n++] = '\n';
	out(report, line, n);
	return 125;
}

/* goerr is Go's text for errno e, which the Go stage prints: strerror's,
 * lower case. */
static const char *goerr(int e)
{
	static char text[128];
	snprintf(text, sizeof text, "%s", strerror(e));
	if (text[0] >= 'A' && text[0] <= 'Z')
		text[0] = (char)(text[0] - 'A' + 'a');
	return text;
}

/* send_control sends json with fds attached (SCM_RIGHTS) as one message on
 * the control channel fd (execstage.SendControl); -1 with errno on failure. */
static int send_control(int fd, const char *json, const int *fds, int nfds)
{
	size_t len = strlen(json);
	if (len > MAX_MESSAGE || nfds < 0 || nfds > MAX_FILES) {
		errno = EMSGSIZE;
		return -1;
	}
	struct iovec iov = {(void *)json, len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FILES)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n;
	do
		n = sendmsg(fd, &msg, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : 0;
}

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

/* open_pty is execstage's openPty: setsid, a pty of the jail's own devpts
 * whose slave (opened through the master, TIOCGPTPEER) becomes the new
 * session's controlling terminal; the master goes to the supervisor as
 * {"kind":"pty","pid":P,"pgid":G,"await":true}; once the supervisor answers
 * ({"kind":"answer"}: it has set the size and modes) the slave becomes 0,
 * 1 and 2. Both close on exec. */
static int open_pty(int control)
{
	if (setsid() < 0)
		return fail("setsid: %s", goerr(errno));
	int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return fail("open /dev/ptmx: %s", goerr(errno));
	int unlock = 0;
	if (ioctl(master, TIOCSPTLCK, &unlock) != 0)
		return fail("unlock the pty: %s", goerr(errno));
	int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return fail("open the pty's slave: %s", goerr(errno));
	if (ioctl(slave, TIOCSCTTY, 0) != 0)
		return fail("make the pty the controlling terminal: %s", goerr(errno));
	char json[128];
	snprintf(json, sizeof json, "{\"kind\":\"pty\",\"pid\":%d,\"pgid\":%d,\"await\":true}", (int)getpid(), (int)getpgrp());
	if (send_control(control, json, &master, 1) != 0)
		return fail("send the pty to the supervisor: %s", goerr(errno));
	close(master);
	static char answer[MAX_MESSAGE];
	ssize_t n;
	do
		n = read(control, answer, sizeof answer);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return fail("wait for the supervisor's answer: %s", goerr(errno));
	if (n == 0)
		return fail("wait for the supervisor's answer: the supervisor closed the control channel");
	if ((size_t)n != strlen("{\"kind\":\"answer\"}") || memcmp(answer, "{\"kind\":\"answer\"}", (size_t)n) != 0)
		return fail("wait for the supervisor's answer: got \"%.*s\"", (int)(n > 200 ? 200 : n), answer);
	for (int fd = 0; fd < 3; fd++)
		if (dup2(slave, fd) < 0)
			return fail("dup2 the pty's slave to %d: %s", fd, goerr(errno));
	close(slave);
	return 0;
}

/* listen_on makes a TCP socket listening on addr (IP:PORT, an IPv6 address
 * in brackets) in the stage's network namespace, sends it over the control
 * channel as {"kind":"listener","addr":A}, A as getsockname says it, and
 * closes its copy (execstage's listen: no SO_REUSEPORT, an IPv6 address
 * only, skipped where the host has no IPv6). */
static int listen_on(int control, const char *addr)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(addr, ':');
	int six = addr[0] == '[';
	size_t hl = colon ? (size_t)(colon - addr) : 0;
	char *end;
	long port = colon ? strtol(colon + 1, &end, 10) : -1;
	if (!colon || colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535 || hl == 0 || hl >= sizeof host ||
	    (six && (hl < 2 || addr[hl - 1] != ']')))
		return fail("--listen \"%s\": not IP:PORT", addr);
	if (six)
		snprintf(host, sizeof host, "%.*s", (int)hl - 2, addr + 1);
	else
		snprintf(host, sizeof host, "%.*s", (int)hl, addr);
	struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
	if (six ? inet_pton(AF_INET6, host, &in6.sin6_addr) != 1 || IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)
		: inet_pton(AF_INET, host, &in4.sin_addr) != 1)
		return fail("--listen \"%s\": not IP:PORT", addr);
	int fd = socket(six ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && six && errno == EAFNOSUPPORT)
		return 0;
	if (fd < 0)
		return fail("listen on %s: socket: %s", addr, goerr(errno));
	int one = 1;
	if (six && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0)
		return fail("listen on %s: IPV6_V6ONLY: %s", addr, goerr(errno));
	if (six ? bind(fd, (struct sockaddr *)&in6, sizeof in6) : bind(fd, (struct sockaddr *)&in4, sizeof in4)) {
		if (six && errno == EADDRNOTAVAIL) {
			close(fd);
			return 0;
		}
		return fail("listen on %s: bind: %s", addr, goerr(errno));
	}
	if (listen(fd, SOMAXCONN) != 0)
		return fail("listen on %s: %s", addr, goerr(errno));
	struct sockaddr_storage got;
	socklen_t gl = sizeof got;
	if (getsockname(fd, (struct sockaddr *)&got, &gl) != 0)
		return fail("listen on %s: getsockname: %s", addr, goerr(errno));
	char ip[INET6_ADDRSTRLEN], name[INET6_ADDRSTRLEN + 16], json[256];
	if (six) {
		struct sockaddr_in6 *g = (struct sockaddr_in6 *)&got;
		inet_ntop(AF_INET6, &g->sin6_addr, ip, sizeof ip);
		snprintf(name, sizeof name, "[%s]:%u", ip, ntohs(g->sin6_port));
	} else {
		struct sockaddr_in *g = (struct sockaddr_in *)&got;
		inet_ntop(AF_INET, &g->sin_addr, ip, sizeof ip);
		snprintf(name, sizeof name, "%s:%u", ip, ntohs(g->sin_port));
	}
	snprintf(json, sizeof json, "{\"kind\":\"listener\",\"addr\":\"%s\"}", name);
	if (send_control(control, json, &fd, 1) != 0)
		return fail("listen on %s: send it to the supervisor: %s", addr, goerr(errno));
	close(fd);
	return 0;
}

struct limit {
	int resource;
	struct rlimit value;
};

static void show(char *buf, size_t cap, rlim_t v)
{
	if (v == RLIM_INFINITY)
		snprintf(buf, cap, "unlimited");
	else
		snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* prepare parses NAME=VALUE into l and reports what will be applied. */
static int prepare(const char *kv, struct limit *l)
{
	const char *eq = strchr(kv, '=');
	if (!eq)
		return fail("unknown rlimit \"%s\"", kv);
	size_t nl = (size_t)(eq - kv);
	int res = -1;
	for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++)
		if (strlen(resources[i].name) == nl && strncmp(resources[i].name, kv, nl) == 0)
			res = resources[i].resource;
	if (res < 0)
		return fail("unknown rlimit \"%.*s\"", (int)nl, kv);
	const char *val = eq + 1;
	rlim_t want = RLIM_INFINITY;
	if (strcmp(val, "unlimited") != 0) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (errno || *val == '\0' || *end != '\0' || *val == '-')
			return fail("rlimit %.*s: bad value \"%s\"", (int)nl, kv, val);
		want = (rlim_t)v;
	}
	struct rlimit old;
	if (getrlimit(res, &old) != 0)
		return fail("getrlimit %.*s: %s", (int)nl, kv, strerror(errno));
	rlim_t applied = want;
	if (want > old.rlim_max) {
		/* Raising the hard limit alone leaves this process as it was. */
		struct rlimit raised = {old.rlim_cur, want};
		if (setrlimit(res, &raised) != 0) {
			if (errno != EPERM)
				return fail("setrlimit %s: %s", kv, strerror(errno));
			applied = old.rlim_max;
		}
	}
	l->resource = res;
	l->value.rlim_cur = l->value.rlim_max = applied;
	char line[256], asked[32], got[32];
	show(got, sizeof got, applied);
	snprintf(asked, sizeof asked, "%s", val);
	int n = snprintf(line, sizeof line, "{\"rlimit\":\"%.*s\",\"asked\":\"%s\",\"applied\":\"%s\"}\n", (int)nl, kv, asked, got);
	out(report, line, (size_t)n);
	return 0;
}

/* execFailed reports that path could not be executed (errno e). */
static int execFailed(const char *path, int e)
{
	char line[PATH_MAX + 256];
	size_t n = 0;
	n += (size_t)snprintf(line, sizeof line, "{\"path\":");
	jsonString(line, sizeof line - 32, &n, path);
	n += (size_t)snprintf(line + n, sizeof line - n, ",\"errno\":%d}\n", e);
	out(report, line, n);
	dprintf(2, "agentjail: cannot execute %s inside the jail: %s\n", path, goerr(e));
	return e == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	const char *limits[MAX_LIMITS], *listens[MAX_LISTEN];
	int nlimits = 0, nlistens = 0, control = -1, pty = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
		if (strcmp(argv[i], "--pty") == 0) {
			pty = 1;
			i--;
			continue;
		}
		if (i + 1 >= argc)
			return fail("%s takes a value", argv[i]);
		if (strcmp(argv[i], "--report-fd") == 0 || strcmp(argv[i], "--control-fd") == 0) {
			char *end;
			long fd = strtol(argv[i + 1], &end, 10);
			if (*argv[i + 1] == '\0' || *end != '\0' || fd < 0 || fd > INT_MAX)
				return fail("%s \"%s\": not a descriptor", argv[i], argv[i + 1]);
			if (argv[i][2] == 'r')
				report = (int)fd;
			else
				control = (int)fd;
		} else if (strcmp(argv[i], "--listen") == 0) {
			if (nlistens == MAX_LISTEN)
				return fail("too many listeners");
			listens[nlistens++] = argv[i + 1];
		} else if (strcmp(argv[i], "--rlimit") == 0) {
			if (nlimits == MAX_LIMITS - 1)
				return fail("too many rlimits");
			limits[nlimits++] = argv[i + 1];
		} else {
			return fail("unexpected argument \"%s\"", argv[i]);
		}
	}
	if (nlistens > 0 && control < 0)
		return fail("--listen needs --control-fd");
	if (pty && control < 0)
		return fail("--pty needs --control-fd");
	if (i + 1 >= argc)
		return fail("no command");
	char **cmd = argv + i + 1;
	if (pty && open_pty(control) != 0)
		return 125;
	for (int k = 0; k < nlistens; k++)
		if (listen_on(control, listens[k]) != 0)
			return 125;

	/* Without a pids controller, limits.pids comes as the nproc rlimit,
	 * through bwrap's environment; the agent does not see the variable. */
	char nproc[64] = "";
	const char *v = getenv(NPROC_VAR);
	if (v) {
		snprintf(nproc, sizeof nproc, "nproc=%s", v);
		unsetenv(NPROC_VAR);
		int given = 0;
		for (int k = 0; k < nlimits; k++)
			given |= strncmp(limits[k], "nproc=", 6) == 0;
		if (!given)
			limits[nlimits++] = nproc;
	}
	struct limit set[MAX_LIMITS];
	for (int k = 0; k < nlimits; k++)
		if (prepare(limits[k], &set[k]) != 0)
			return 125;
	/* Everything above stderr closes at exec: inherited descriptors never
	 * reach the agent, and the report's closing says the exec happened. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		return fail("close_range: %s", strerror(errno));
	for (int k = 0; k < nlimits; k++)
		if (setrlimit(set[k].resource, &set[k].value) != 0)
			return fail("setrlimit %s: %s", limits[k], strerror(errno));

	if (strchr(cmd[0], '/')) {
		execve(cmd[0], cmd, environ);
		return execFailed(cmd[0], errno);
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	const char *failed = NULL;
	int err = ENOENT;
	static char tried[PATH_MAX], last[PATH_MAX];
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int dl = (int)(end - p);
		/* An empty element is the current directory (filepath.Join's "."). */
		if (dl == 0)
			snprintf(tried, sizeof tried, "%s", cmd[0]);
		else
			snprintf(tried, sizeof tried, "%.*s/%s", dl, p, cmd[0]);
		execve(tried, cmd, environ);
		int e = errno;
		struct stat st;
		/* An unsearchable PATH directory also answers EACCES; only a file
		 * that is there but cannot be executed makes a 126. */
		if (!(e == EACCES && stat(tried, &st) != 0) && e != ENOENT && e != ENOTDIR) {
			snprintf(last, sizeof last, "%s", tried);
			failed = last;
			err = e;
		}
		if (*end == '\0')
			break;
		p = end;
	}
	return execFailed(failed ? failed : cmd[0], err);
}
