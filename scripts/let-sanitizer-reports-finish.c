// Preloaded into every process of the sanitizer run (scripts/sanitize.sh). A thread's ASan report races the
// process's exit: when the main thread returns while another thread is reporting, exit() ends the process
// mid-report, and CI saw three lines and no stack (session 48). This library's destructor runs at the very end
// of exit(): if this process has begun a report (its log file, <log_path>.<pid>, exists), it waits, so that the
// report completes and ASan aborts the process (abort_on_error), which fails the test that started it. A process
// with no report does not wait.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kWaitSeconds = 10 };

__attribute__((destructor)) static void let_reports_finish(void) {
    const char* options = getenv("ASAN_OPTIONS");
    const char* path = options ? strstr(options, "log_path=") : NULL;
    if (path == NULL) return;
    path += strlen("log_path=");
    char report[4096];
    const int prefix = (int)strcspn(path, ":");
    if (snprintf(report, sizeof report, "%.*s.%d", prefix, path, (int)getpid()) >= (int)sizeof report) return;
    if (access(report, F_OK) != 0) return;
    sleep(kWaitSeconds);  // the reporting thread aborts the process long before this ends
}
