from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("hitl", "0006_audit_blocks_truncate"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="thread",
            options={
                "permissions": [
                    (
                        "run_any_thread",
                        "Can start runs on, upload files to and change threads requested by others",
                    )
                ]
            },
        ),
    ]
