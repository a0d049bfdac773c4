/* The C side of `ipc-parent c-api` (bin/src/parent/c_api.rs): seed 003's workloads written in C.
 *
 *   bench stream-shm  NAME SIZE SECONDS   one-way stream through libshmlink
 *   bench stream-pipe SIZE SECONDS        the same through a pipe, as seed 003 writes it
 *   bench ping-shm    NAME SIZE SECONDS   round trips through libshmlink
 *
 * Each forks its peer: the sender sends SIZE-byte messages for SECONDS (after a warm-up of a
 * tenth of that), then an empty message (the end); the receiver counts the messages between
 * the first after the warm-up and the end, and the parent prints `rate R` (messages or round
 * trips per second, the receiver's count over its time). */

#define _GNU_SOURCE
#include "shmlink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void check(shmlink_status s, const char *what) {
    if (s != SHMLINK_OK) {
        fprintf(stderr, "bench: %s: %s: %s\n", what, shmlink_status_name(s), shmlink_last_error());
        exit(1);
    }
}

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { perror("write"); exit(1); }
        c += w;
        n -= (size_t)w;
    }
}

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return 0;
        if (r < 0) { perror("read"); exit(1); }
        c += r;
        n -= (size_t)r;
    }
    return 1;
}

/* Sends for `seconds` after a warm-up: messages of `size` bytes, checking the clock every 256;
 * the first byte is 1 during the warm-up, 2 after it; then a one-byte 0 (the end). */
typedef void (*send_fn)(void *ctx, const uint8_t *m, size_t n);

static void send_for(send_fn send, void *ctx, size_t size, double seconds) {
    uint8_t *m = malloc(size);
    memset(m, 7, size);
    double start = now(), warm = start + seconds / 10, end = warm + seconds;
    m[0] = 1;
    for (;;) {
        for (int i = 0; i < 256; i++) send(ctx, m, size);
        double t = now();
        if (t >= end) break;
        if (t >= warm) m[0] = 2;
    }
    uint8_t stop = 0;
    send(ctx, &stop, 1);
    free(m);
}

static void shm_send(void *ctx, const uint8_t *m, size_t n) { check(shmlink_send(ctx, m, n), "send"); }

static void pipe_send(void *ctx, const uint8_t *m, size_t n) {
    int fd = *(int *)ctx;
    uint32_t len = (uint32_t)n;
    write_all(fd, &len, 4);
    write_all(fd, m, n);
}

static double stream_shm(const char *name, size_t size, double seconds) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        shmlink_channel *tx;
        check(shmlink_channel_connect(name, 10000, &tx), "connect");
        send_for(shm_send, tx, size, seconds);
        shmlink_channel_close(tx);
        _exit(0);
    }
    close(fds[1]);
    shmlink_channel *rx;
    check(shmlink_channel_create(name, 0, &rx), "create");
    const uint8_t *data;
    size_t len;
    uint64_t n = 0;
    double first = 0;
    for (;;) {
        check(shmlink_recv(rx, &data, &len), "recv");
        uint8_t tag = data[0];
        check(shmlink_release(rx), "release");
        if (tag == 0) break;
        if (tag == 2) {
            if (n == 0) first = now();
            n++;
        }
    }
    double rate = (double)n / (now() - first);
    int status;
    waitpid(pid, &status, 0);
    shmlink_channel_close(rx);
    return rate;
}

static double stream_pipe(size_t size, double seconds) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        send_for(pipe_send, &fds[1], size, seconds);
        _exit(0);
    }
    close(fds[1]);
    uint8_t *m = malloc(size + 1);
    uint64_t n = 0;
    double first = 0;
    for (;;) {
        uint32_t len;
        if (!read_all(fds[0], &len, 4) || !read_all(fds[0], m, len)) break;
        if (m[0] == 0) break;
        if (m[0] == 2) {
            if (n == 0) first = now();
            n++;
        }
    }
    double rate = (double)n / (now() - first);
    int status;
    waitpid(pid, &status, 0);
    free(m);
    return rate;
}

static double ping_shm(const char *name, size_t size, double seconds) {
    pid_t pid = fork();
    if (pid == 0) {
        shmlink_channel *ch;
        check(shmlink_channel_connect(name, 10000, &ch), "connect");
        uint8_t *copy = malloc(size + 1);
        for (;;) {
            size_t len;
            shmlink_status s = shmlink_recv_into(ch, copy, size + 1, &len);
            if (s == SHMLINK_DISCONNECTED) break;
            check(s, "recv_into");
            check(shmlink_send(ch, copy, len), "send");
        }
        free(copy);
        shmlink_channel_close(ch);
        _exit(0);
    }
    shmlink_channel *ch;
    check(shmlink_channel_create(name, 0, &ch), "create");
    uint8_t *m = malloc(size), *back = malloc(size);
    memset(m, 7, size);
    double start = now(), warm = start + seconds / 10, end = warm + seconds, first = 0;
    uint64_t n = 0;
    for (;;) {
        size_t len;
        check(shmlink_send(ch, m, size), "send");
        check(shmlink_recv_into(ch, back, size, &len), "recv_into");
        double t = now();
        if (t >= warm) {
            if (n == 0) first = t;
            n++;
            if (t >= end) break;
        }
    }
    double rate = (double)n / (now() - first);
    shmlink_channel_close(ch);
    int status;
    waitpid(pid, &status, 0);
    free(m);
    free(back);
    return rate;
}

int main(int argc, char **argv) {
    double rate;
    if (argc == 5 && strcmp(argv[1], "stream-shm") == 0) rate = stream_shm(argv[2], (size_t)atol(argv[3]), atof(argv[4]));
    else if (argc == 4 && strcmp(argv[1], "stream-pipe") == 0) rate = stream_pipe((size_t)atol(argv[2]), atof(argv[3]));
    else if (argc == 5 && strcmp(argv[1], "ping-shm") == 0) rate = ping_shm(argv[2], (size_t)atol(argv[3]), atof(argv[4]));
    else {
        fprintf(stderr, "usage: bench stream-shm NAME SIZE SECONDS | stream-pipe SIZE SECONDS | ping-shm NAME SIZE SECONDS\n");
        return 2;
    }
    printf("rate %.0f\n", rate);
    return 0;
}
