package agenttext

// The vocabulary below is fixed: changing it changes every generated
// output, so do it only knowing that benchmarks' figures move with it.

var templates = []string{
	"I'll {verb} the {service} service in {region} before touching the {noun}.",
	"The {noun} for {service} is {adj}, so I need to {verb} it first.",
	"Can you {verb} the {bucket} bucket and send the report to {email}?",
	"Running migration {migration} on the {env} database; it should take about {num} seconds.",
	"The last deploy of {service} {version} failed with exit code {num} in {region}.",
	"Billing shows {money} charged to account {id} this month, up {pct} from last month.",
	"Next I will call {tool} with the {noun} id {id} and check the response.",
	"{person} asked to {verb} the {adj} {noun} before the {env} rollout.",
	"According to the logs, {service} has been {verbing} the {noun} since {num} ms after startup.",
	"Let me check whether the {noun} in {region} is still {adj} by running {code}.",
	"Step {num}: {verb} the {noun}, then {verb} the {service} {noun}.",
	"I sent the summary email to {email} with the {noun} attached.",
	"The {bucket} bucket holds {num} objects and {pct} of them are {adj}.",
	"Error: {service} returned 503 while {verbing} the {noun}; retrying in {num} seconds.",
	"To be safe I'll use the idempotency key {id} so the {noun} is not touched twice.",
	"Please confirm that {service} in {region} can be scaled to {num} replicas.",
	"The migration {migration} added an index on {noun}_id and it took {num} ms.",
	"I found {num} {adj} {noun}s in {env}; the plan is to {verb} them in batches of {num}.",
	"Invoice {id} for {money} was sent to {email} and marked as {adj}.",
	"The {service} health check at /healthz is {adj} after {verbing} the {noun}.",
	"Set {code} in the {env} config and redeploy {service} {version}.",
	"Rolling back {service} to {version} because the {noun} is {adj} in {region}.",
	"I don't have permission to {verb} the {noun}; {person} owns the {service} project.",
	"Summary so far: {num} {noun}s done, {num} pending, total cost {money}.",
}

var nouns = []string{
	"bucket", "deployment", "migration", "invoice", "customer", "subscription",
	"region", "cluster", "node", "replica", "certificate", "secret", "token",
	"schema", "table", "index", "queue", "topic", "webhook", "endpoint",
	"container", "image", "pipeline", "build", "artifact", "release",
	"policy", "role", "user", "account", "payment", "refund", "email",
	"template", "report", "dashboard", "alert", "incident", "log", "metric",
	"backup", "snapshot", "volume", "disk", "load balancer", "DNS record",
	"firewall rule", "API key", "quota", "budget", "tenant", "workspace",
}

var verbs = []string{
	"deploy", "create", "delete", "migrate", "restart", "scale", "rotate",
	"provision", "archive", "restore", "refund", "charge", "notify", "email",
	"update", "inspect", "verify", "upload", "download", "tag", "promote",
	"roll back", "back up", "configure", "enable", "disable", "invite", "revoke",
}

var verbings = []string{
	"deploying", "creating", "deleting", "migrating", "restarting", "scaling",
	"rotating", "provisioning", "archiving", "restoring", "charging",
	"updating", "verifying", "uploading", "retrying", "polling",
}

var adjectives = []string{
	"stale", "healthy", "degraded", "pending", "active", "expired", "idle",
	"public", "private", "encrypted", "unused", "orphaned", "critical",
	"overdue", "paid", "failed", "new", "legacy", "primary", "read-only",
}

var common = []string{
	"the", "a", "and", "to", "of", "in", "for", "is", "it", "that", "with",
	"on", "this", "be", "we", "I", "not", "but", "then", "now", "first",
	"after", "before", "again", "still", "already", "should", "will", "can",
}

var services = []string{
	"api-gateway", "billing-worker", "auth", "checkout", "search-indexer",
	"notifications", "ledger", "web-frontend", "image-resizer", "scheduler",
	"payments", "reporting", "inventory", "user-profile", "mailer",
}

var regions = []string{
	"us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1",
	"ap-northeast-1", "sa-east-1", "ca-central-1",
}

var envs = []string{"prod", "staging", "dev", "qa", "canary"}

var bucketPrefixes = []string{
	"logs", "backups", "assets", "exports", "uploads", "invoices", "artifacts",
}

var people = []string{
	"alice", "bob", "carol", "dmitri", "eve", "farah", "grace", "hiro",
	"ines", "jamal", "kenji", "lena", "ops", "billing", "support",
}

var domains = []string{"example.com", "acme.io", "corp.example.org", "mail.test"}

var migrationNames = []string{
	"add_customer_email_index", "drop_legacy_sessions", "create_invoices",
	"backfill_region_column", "rename_plan_to_tier", "add_refunds_table",
}

var tools = []string{
	"deploy_service", "create_bucket", "delete_bucket", "run_migration",
	"send_email", "charge_customer", "issue_refund", "scale_service",
	"get_logs", "list_buckets", "query_billing", "rotate_secret",
	"http_get", "search_docs", "create_ticket",
}

var commands = []string{
	"kubectl rollout status deploy/", "terraform apply -target=module.",
	"gcloud run deploy", "aws s3 ls s3://", "psql -c 'select count(*) from'",
	"helm upgrade --install", "docker push registry.example.com/",
}

var codeSnippets = []string{
	"kubectl get pods -l app=web", "SELECT id, email FROM customers WHERE plan = 'pro'",
	"MAX_CONNECTIONS=200", "retry(backoff=2.0, attempts=5)", "git log --oneline -5",
	"curl -s https://status.example.com/api", "ALTER TABLE invoices ADD COLUMN region text",
	"LOG_LEVEL=debug", "aws s3 rm --recursive", "replicas: 3",
}

var statuses = []string{
	"ok", "succeeded", "pending", "running", "failed", "not_found",
	"accepted", "queued", "completed", "throttled",
}

var argKeys = []string{
	"bucket", "migration", "version", "replicas", "timeout_seconds",
	"dry_run", "force", "notify", "tags", "recipient", "reason", "note",
	"limit", "amount_cents", "description",
}
