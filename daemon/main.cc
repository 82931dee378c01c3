// Replaced by the daemon issue.
int main() { return 1; }
