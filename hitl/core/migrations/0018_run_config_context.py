from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hitl", "0017_admin_labels"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="config",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="run",
            name="context",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="run",
            name="command",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="run",
            name="breakpoints",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="run",
            name="multitask_strategy",
            field=models.CharField(blank=True, max_length=12),
        ),
    ]
