package config

import (
	"strings"
	"testing"
)

func TestS3StorageKeys(t *testing.T) {
	isolate(t)
	const secret = "s3-secret-do-not-print"
	t.Setenv("FLYTE_MANAGER_STORAGE_S3_SECRET_ACCESS_KEY", secret)
	t.Setenv("FLYTE_MANAGER_STORAGE_S3_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("FLYTE_MANAGER_STORAGE_S3_FORCE_PATH_STYLE", "true")
	f := writeFile(t, t.TempDir(), "c.yaml", `
storage:
  url: s3://flyte-data/runs
  s3:
    endpoint: http://minio:9000
    region: eu-west-1
`)
	c, err := Load(Sources{Files: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	want := S3Storage{Endpoint: "http://minio:9000", Region: "eu-west-1", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: secret, ForcePathStyle: true}
	if c.Storage.S3 != want {
		t.Fatalf("storage.s3 = %+v, want %+v", c.Storage.S3, want)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), secret) || !strings.Contains(string(out), "secretAccessKey: "+RedactedValue) {
		t.Fatalf("printed configuration shows the secret key or does not say it is set:\n%s", out)
	}
	if c.Storage.S3.SecretAccessKey != secret {
		t.Fatal("Redacted modified the original")
	}
}

func TestS3StorageValidation(t *testing.T) {
	isolate(t)
	const secret = "s3-secret-do-not-print"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"s3 keys on file storage", "storage:\n  url: file:///tmp/x\n  s3:\n    region: us-east-1\n", "storage.s3: applies to s3:// storage only"},
		{"query in url", "storage:\n  url: s3://b?region=x\n", "storage.url: takes no query parameters"},
		{"endpoint", "storage:\n  url: s3://b\n  s3:\n    endpoint: minio:9000\n", "storage.s3.endpoint: must be an http:// or https:// URL"},
		{"endpoint with credentials", "storage:\n  url: s3://b\n  s3:\n    endpoint: http://u:p@minio:9000\n", "storage.s3.endpoint"},
		{"region", "storage:\n  url: s3://b\n  s3:\n    region: Not A Region\n", "storage.s3.region"},
		{"secret without id", "storage:\n  url: s3://b\n  s3:\n    secretAccessKey: " + secret + "\n", "storage.s3.accessKeyID: must be set with storage.s3.secretAccessKey"},
		{"id without secret", "storage:\n  url: s3://b\n  s3:\n    accessKeyID: AKID\n", "storage.s3.secretAccessKey: must be set with storage.s3.accessKeyID"},
		{"unknown key", "storage:\n  url: s3://b\n  s3:\n    secretKey: x\n", "secretKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeFile(t, t.TempDir(), "c.yaml", tc.yaml)
			_, err := Load(Sources{Files: []string{f}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the secret key: %v", err)
			}
		})
	}
}

func TestS3EndpointKeys(t *testing.T) {
	isolate(t)
	const secret = "endpoint-secret-do-not-print"
	t.Setenv("FLYTE_MANAGER_STORAGE_S3_ENDPOINT_SECRET_ACCESS_KEY", secret)
	t.Setenv("FLYTE_MANAGER_STORAGE_S3ENDPOINT_ACCESSKEYID", "minio")
	c, err := Load(Sources{})
	if err != nil {
		t.Fatal(err)
	}
	want := S3Endpoint{Listen: DefaultS3EndpointListen, Bucket: "flyte", TaskLocations: TaskLocationsS3, AccessKeyID: "minio", SecretAccessKey: secret}
	if c.Storage.S3Endpoint != want {
		t.Fatalf("storage.s3Endpoint = %+v, want %+v", c.Storage.S3Endpoint, want)
	}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), secret) {
		t.Fatalf("printed configuration shows the endpoint's secret key:\n%s", out)
	}
}

func TestS3EndpointValidation(t *testing.T) {
	isolate(t)
	for _, tc := range []struct{ yaml, want string }{
		{"storage:\n  s3Endpoint:\n    bucket: Flyte_Data\n", "storage.s3Endpoint.bucket"},
		{"storage:\n  s3Endpoint:\n    taskLocations: gcs\n", "storage.s3Endpoint.taskLocations"},
		{"storage:\n  s3Endpoint:\n    listen: nowhere\n", "storage.s3Endpoint.listen"},
		{"storage:\n  s3Endpoint:\n    accessKeyID: a\n", "storage.s3Endpoint.secretAccessKey: must be set"},
	} {
		f := writeFile(t, t.TempDir(), "c.yaml", tc.yaml)
		if _, err := Load(Sources{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
