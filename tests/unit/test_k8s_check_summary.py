"""`make k8s` prints counts and the details of failures only, skips with their reasons."""

from deploy.k8s_check import checkov_summary


def test_checkov_summary_counts_everything_and_details_only_failures_and_skips():
    passed = [{"check_id": f"CKV_K8S_{i}", "check_name": "ok", "resource": "r"} for i in range(500)]
    report = {
        "check_type": "kubernetes",
        "summary": {"passed": 500, "failed": 1, "skipped": 2, "resource_count": 9},
        "results": {
            "passed_checks": passed,
            "failed_checks": [
                {
                    "check_id": "CKV_K8S_8",
                    "check_name": "Liveness Probe Should be Configured",
                    "resource": "Deployment.torchserve.torchserve",
                    "file_path": "/gpu.yaml",
                    "file_line_range": [1, 9],
                }
            ],
            "skipped_checks": [
                {
                    "check_id": "CKV_K8S_43",
                    "check_result": {"suppress_comment": "digest at release"},
                }
            ]
            * 2,
        },
    }
    lines = checkov_summary(report)
    assert lines[0] == "checkov kubernetes: 500 passed, 1 failed, 2 skipped over 9 resources"
    assert len(lines) == 3
    assert "FAILED CKV_K8S_8" in lines[1] and "Deployment.torchserve" in lines[1]
    assert lines[2] == "  skipped CKV_K8S_43 x2: digest at release"
