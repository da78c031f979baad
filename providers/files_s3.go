package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskorch/taskorch"
)

// DefaultS3Region is the region of the s3 signer when none is configured.
const DefaultS3Region = "us-east-1"

// DefaultPresignExpires is how long a presigned DELETE URL of the s3 signer is valid.
const DefaultPresignExpires = 5 * time.Minute

// S3SignerConfig configures the s3 files signer.
type S3SignerConfig struct {
	// Endpoint is the S3-compatible store's URL, e.g. "http://127.0.0.1:7070" or
	// "https://s3.eu-west-1.amazonaws.com". Defaults to AWS's endpoint for Region.
	Endpoint string
	// Region signs the requests. Defaults to DefaultS3Region.
	Region string
	// AccessKeyID and SecretAccessKey sign the URLs. Required.
	AccessKeyID     string
	SecretAccessKey string
	// VirtualHostedStyle addresses buckets as bucket.host instead of host/bucket. Defaults to
	// false: path-style, which every S3-compatible store understands.
	VirtualHostedStyle bool
	// PresignExpires is how long a URL is valid. Defaults to DefaultPresignExpires.
	PresignExpires time.Duration
	// Timeout bounds the DELETE. Defaults to DefaultTimeout. Ignored with HTTPClient.
	Timeout time.Duration
	// HTTPClient sends the DELETE. Defaults to a client with Timeout.
	HTTPClient *http.Client
}

// S3Signer deletes files in an S3-compatible store: it presigns a DeleteObject request itself
// with the AWS SDK for Go v2 (Signature V4, in the URL's query) and sends the DELETE.
type S3Signer struct {
	presign *s3.PresignClient
	expires time.Duration
	hc      *http.Client
	red     redactor
}

// NewS3Signer returns an s3 files signer.
func NewS3Signer(cfg S3SignerConfig) (*S3Signer, error) {
	switch {
	case cfg.AccessKeyID == "":
		return nil, errors.New("s3: the access key id is empty (TASKORCH_S3_ACCESS_KEY_ID)")
	case cfg.SecretAccessKey == "":
		return nil, errors.New("s3: the secret access key is empty (TASKORCH_S3_SECRET_ACCESS_KEY)")
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("s3: the endpoint %q is not an http(s) URL (TASKORCH_S3_ENDPOINT)", cfg.Endpoint)
		}
	}
	region := cfg.Region
	if region == "" {
		region = DefaultS3Region
	}
	expires := cfg.PresignExpires
	if expires <= 0 {
		expires = DefaultPresignExpires
	}
	client := s3.New(s3.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		UsePathStyle: !cfg.VirtualHostedStyle,
	}, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &S3Signer{
		presign: s3.NewPresignClient(client, s3.WithPresignExpires(expires)),
		expires: expires,
		hc:      httpClient(cfg.HTTPClient, cfg.Timeout, nil),
		red:     newRedactor(cfg.SecretAccessKey),
	}, nil
}

// Presign returns a presigned DELETE URL for the object and the headers to send with it.
func (p *S3Signer) Presign(ctx context.Context, bucket, objectKey string) (signedURL string, headers map[string]string, err error) {
	req, err := p.presign.PresignDeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(objectKey)})
	if err != nil {
		return "", nil, p.red.newError("s3", 0, "", "presign: "+err.Error(), true).result()
	}
	headers = map[string]string{}
	for k, vs := range req.SignedHeader {
		if len(vs) > 0 {
			headers[k] = vs[0]
		}
	}
	return req.URL, headers, nil
}

// Call deletes the object of call.Request (a FileDeleteRequest) and returns
// {"provider":"s3","bucket":...,"object_key":...,"http_status":204,"already_gone":false}.
func (p *S3Signer) Call(ctx context.Context, call taskorch.ChannelCall) (json.RawMessage, error) {
	req, err := parseFileDelete("s3", call)
	if err != nil {
		return nil, err
	}
	signedURL, headers, err := p.Presign(ctx, req.Bucket, req.ObjectKey)
	if err != nil {
		return nil, err
	}
	return deleteSigned(ctx, p.hc, "s3", p.red, req, signedURL, headers)
}
