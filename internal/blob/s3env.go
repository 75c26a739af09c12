package blob

// The environment through which a process reaches an S3 store: the names
// the flyte SDK reads (flyte/storage/_config.py), also read by the
// manager's own copilot (S3FromEnv). AWS_REGION is read by the SDK's
// object store library and by the AWS SDKs.
const (
	EnvS3Endpoint        = "FLYTE_AWS_ENDPOINT"
	EnvS3AccessKeyID     = "FLYTE_AWS_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "FLYTE_AWS_SECRET_ACCESS_KEY"
	// EnvS3AddressingStyle is "path" or "virtual"; the SDK's default is path.
	EnvS3AddressingStyle = "FLYTE_AWS_S3_ADDRESSING_STYLE"
	EnvAWSRegion         = "AWS_REGION"
)

// ProcessEnv returns what a process needs to reach the store as o does:
// env holds the variables that are not secret (endpoint, region,
// addressing style), secret the credentials (access key ID and secret
// key), which must travel like a task's secrets; secret is empty for the
// default AWS credential chain (the process has its own, e.g. a Pod's
// service account).
func (o S3Options) ProcessEnv() (env, secret map[string]string) {
	env, secret = map[string]string{}, map[string]string{}
	if o.Endpoint != "" {
		env[EnvS3Endpoint] = o.Endpoint
	}
	region := o.Region
	if region == "" && o.Endpoint != "" {
		region = regionForEndpoint
	}
	if region != "" {
		env[EnvAWSRegion] = region
	}
	env[EnvS3AddressingStyle] = "virtual"
	if o.ForcePathStyle {
		env[EnvS3AddressingStyle] = "path"
	}
	if o.AccessKeyID != "" {
		secret[EnvS3AccessKeyID] = o.AccessKeyID
		secret[EnvS3SecretAccessKey] = o.SecretAccessKey
	}
	return env, secret
}

// S3FromEnv reads what ProcessEnv writes (getenv is os.Getenv in a
// process). Conditional writes are not probed in such a process: the
// manager did at its start.
func S3FromEnv(getenv func(string) string) S3Options {
	return S3Options{
		Endpoint:        getenv(EnvS3Endpoint),
		Region:          getenv(EnvAWSRegion),
		AccessKeyID:     getenv(EnvS3AccessKeyID),
		SecretAccessKey: getenv(EnvS3SecretAccessKey),
		ForcePathStyle:  getenv(EnvS3AddressingStyle) != "virtual",
	}
}
